-- recurring_spec_error checks a recurring schedule's spec and returns what
-- is wrong with it, naming the field, or NULL when it is valid. It accepts
-- exactly what the Go parser (internal/cronspec) accepts, so SQL and Go
-- refuse the same specs (a test runs both over the same table): five or
-- six cron fields (seconds first), the shorthands @yearly, @annually,
-- @monthly, @weekly, @daily, @midnight, @hourly, and @every with a Go
-- duration that is a whole number of seconds, at least 1s. Computing ticks
-- is the Go side's job (the cluster's leader materializes them).
CREATE OR REPLACE FUNCTION pgsched.recurring_spec_error(spec text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    words  text[];
    fname  text[] := ARRAY['second', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
    fmin   integer[] := ARRAY[0, 0, 0, 1, 1, 0];
    fmax   integer[] := ARRAY[59, 59, 23, 31, 12, 7];
    flast  integer[] := ARRAY[59, 59, 23, 31, 12, 6];
    months text[] := ARRAY['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
    days   text[] := ARRAY['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
    k      integer;
    f      text;
    item   text;
    rng    text;
    parts  text[];
    ends   text[];
    v      integer[];
    e      text;
    secs   numeric := 0;
    m      text[];
BEGIN
    words := array_remove(regexp_split_to_array(coalesce(spec, ''), '\s+'), '');
    IF cardinality(words) = 0 THEN
        RETURN 'empty spec';
    END IF;
    IF left(words[1], 1) = '@' THEN
        IF lower(words[1]) = '@every' THEN
            IF cardinality(words) = 1 THEN
                RETURN '@every needs a duration, like "@every 1h30m"';
            ELSIF cardinality(words) > 2 THEN
                RETURN format('@every "%s": want one duration, without spaces', array_to_string(words[2:], ' '));
            END IF;
            IF words[2] !~ '^[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$' AND words[2] !~ '^[+-]?0$' THEN
                RETURN format('@every "%s": not a duration (want Go syntax like 90s, 15m or 1h30m)', words[2]);
            END IF;
            FOR m IN SELECT regexp_matches(words[2], '([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)', 'g') LOOP
                secs := secs + m[1]::numeric * CASE m[2] WHEN 'h' THEN 3600 WHEN 'm' THEN 60 WHEN 's' THEN 1 WHEN 'ms' THEN 0.001
                                                        WHEN 'ns' THEN 0.000000001 ELSE 0.000001 END;
            END LOOP;
            IF left(words[2], 1) = '-' THEN
                secs := -secs;
            END IF;
            IF secs > 9223372036.854775807 THEN
                RETURN format('@every "%s": not a duration (want Go syntax like 90s, 15m or 1h30m)', words[2]);
            ELSIF secs < 1 THEN
                RETURN format('@every "%s": the interval must be at least 1s', words[2]);
            ELSIF secs <> trunc(secs) THEN
                RETURN format('@every "%s": the interval must be a whole number of seconds', words[2]);
            END IF;
            RETURN NULL;
        END IF;
        IF lower(words[1]) NOT IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') THEN
            RETURN format('unknown shorthand "%s" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)', words[1]);
        ELSIF cardinality(words) > 1 THEN
            RETURN format('%s takes no arguments, got "%s"', lower(words[1]), array_to_string(words[2:], ' '));
        END IF;
        RETURN NULL;
    END IF;
    IF cardinality(words) NOT IN (5, 6) THEN
        RETURN format('want 5 or 6 fields, got %s', cardinality(words));
    END IF;
    FOR i IN 1 .. cardinality(words) LOOP
        k := i + 6 - cardinality(words);
        f := words[i];
        IF f = '*' OR left(f, 2) = '*/' THEN
            IF position(',' IN f) > 0 THEN
                RETURN format('%s field "%s": * must stand alone, not in a list', fname[k], f);
            END IF;
            IF f <> '*' THEN
                e := substr(f, 3);
                IF e = '' THEN
                    RETURN format('%s field "%s": missing step after /', fname[k], f);
                ELSIF e !~ '^[0-9]+$' THEN
                    RETURN format('%s field "%s": step "%s" is not a number', fname[k], f, e);
                ELSIF length(e) > 4 OR e::integer < 1 OR e::integer > flast[k] - fmin[k] + 1 THEN
                    RETURN format('%s field "%s": step %s out of range 1-%s', fname[k], f, e, flast[k] - fmin[k] + 1);
                END IF;
            END IF;
            CONTINUE;
        END IF;
        FOREACH item IN ARRAY string_to_array(f, ',') LOOP
            IF item = '' THEN
                RETURN format('%s field "%s": empty list item', fname[k], f);
            END IF;
            parts := regexp_match(item, '^([^/]*)(/(.*))?$');
            rng := parts[1];
            IF parts[2] IS NOT NULL THEN
                e := parts[3];
                IF e = '' THEN
                    RETURN format('%s field "%s": missing step after /', fname[k], f);
                ELSIF e !~ '^[0-9]+$' THEN
                    RETURN format('%s field "%s": step "%s" is not a number', fname[k], f, e);
                ELSIF length(e) > 4 OR e::integer < 1 OR e::integer > flast[k] - fmin[k] + 1 THEN
                    RETURN format('%s field "%s": step %s out of range 1-%s', fname[k], f, e, flast[k] - fmin[k] + 1);
                END IF;
            END IF;
            IF rng = '*' THEN
                RETURN format('%s field "%s": * must stand alone, not in a list', fname[k], f);
            END IF;
            ends := regexp_match(rng, '^([^-]*)(-(.*))?$');
            v := '{}';
            FOREACH e IN ARRAY ARRAY[ends[1], ends[3]] LOOP
                CONTINUE WHEN e IS NULL AND cardinality(v) = 1;
                IF coalesce(e, '') = '' THEN
                    RETURN format('%s field "%s": missing value in "%s"', fname[k], f, item);
                ELSIF e ~ '^[0-9]+$' THEN
                    IF length(e) > 4 OR e::integer < fmin[k] OR e::integer > fmax[k] THEN
                        RETURN format('%s field "%s": value %s out of range %s-%s', fname[k], f, e, fmin[k], fmax[k]);
                    END IF;
                    v := v || e::integer;
                ELSIF k = 5 AND upper(e) = ANY (months) THEN
                    v := v || array_position(months, upper(e));
                ELSIF k = 6 AND upper(e) = ANY (days) THEN
                    v := v || (array_position(days, upper(e)) - 1);
                ELSE
                    RETURN format('%s field "%s": "%s" is not a number%s%s', fname[k], f, e,
                        CASE k WHEN 5 THEN ' or a name JAN-DEC' WHEN 6 THEN ' or a name SUN-SAT' ELSE '' END,
                        CASE WHEN k IN (4, 6) AND e ~ '[LlWw#?]' THEN ' (the L, W, # and ? extensions are not supported)' ELSE '' END);
                END IF;
            END LOOP;
            IF cardinality(v) = 2 AND v[1] > v[2] THEN
                RETURN format('%s field "%s": range "%s" runs backwards', fname[k], f, rng);
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;
