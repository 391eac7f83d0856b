#!/usr/bin/env bash
# Instructions per task that PostgreSQL spends in pgsched's claim and
# finish, counted by callgrind, for two commits: a measure of the SQL's cost
# that does not move with the machine's load (bench-ab.sh's throughput
# ratios move ±20% a pair here), to find where SQL time goes and to check a
# change to it before the interleaved benchmark.
#
#   ./scripts/sql-instructions.sh BASE [NEW]
#     BASE  a commit-ish of the project (e.g. the fixed baseline 800198c)
#     NEW   a commit-ish, or omitted: the working tree as it is now
#   N (20000)   tasks of the own workload
#   N_ORDERED (100000)  tasks of the ordered workload: 100 per ordering_id,
#               as in cmd/bench's (b). With 20 per ordering_id the first
#               claims weigh five times as much, and the hand-over path,
#               where (b) spends its time, too little to show.
#   WORKLOADS ("own ordered")
#   SQLI_PGPORT (25601), SQLI_DIR (/tmp/sql-instructions): the private
#               server and where the counts (callgrind.<commit>.<workload>)
#               are kept for callgrind_annotate
#
# For each commit and workload it migrates a fresh cluster with that
# commit's cmd/migrate, enqueues N tasks (own: each its own ordering_id;
# ordered: N_ORDERED over 1,000 ordering_ids), stops the server, and runs one backend
# in single-user mode under valgrind with a driver that does what a
# worker's loop does in SQL: claim up to 400, finish them all as completed
# with hand-over room for as many (the successors handed over are finished
# next, with what the claim tops up), commit, until nothing is left. Only
# the driver is counted (--toggle-collect=plpgsql_inline_handler). What it
# leaves out: the wire protocol, the worker's other statements, waits.
# Needs root (the server runs as OS user postgres), valgrind and PostgreSQL
# 15's binaries. About one minute per commit for own, two for ordered.
set -euo pipefail
BASE="${1:?usage: sql-instructions.sh BASE [NEW]}"
NEW="${2:-}"
N="${N:-20000}"
N_ORDERED="${N_ORDERED:-100000}"
WORKLOADS="${WORKLOADS:-own ordered}"
PORT="${SQLI_PGPORT:-25601}"
DIR="${SQLI_DIR:-/tmp/sql-instructions}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
command -v valgrind >/dev/null || { echo "sql-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
root="$(git rev-parse --show-toplevel)"
work="$(mktemp -d /tmp/sql-instructions.XXXXXX)"
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }
data="$work/data"
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
  git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true
  [ -d "$work/new" ] && git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$DIR"; chmod 777 "$DIR" "$work"

git -C "$root" worktree add --detach "$work/base" "$BASE" >/dev/null 2>&1
(cd "$work/base" && go build -o "$work/migrate-old" ./cmd/migrate)
if [ -n "$NEW" ]; then
  git -C "$root" worktree add --detach "$work/new" "$NEW" >/dev/null 2>&1
  (cd "$work/new" && go build -o "$work/migrate-new" ./cmd/migrate)
else
  (cd "$root" && go build -o "$work/migrate-new" ./cmd/migrate)
fi

# count VARIANT WORKLOAD IDS: prints instructions per task.
count() {
  local v="$1" w="$2" ids="$3" n="$4" url="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
  rm -rf "$data"; mkdir -p "$data"; chown postgres "$data"; chmod 700 "$data"
  as_pg "$PGBIN/initdb" -D "$data" -U postgres --auth=trust >/dev/null
  as_pg "$PGBIN/pg_ctl" -D "$data" -o "-p $PORT -c fsync=off" -l "$work/log" start >/dev/null
  DATABASE_URL="$url" "$work/migrate-$v" up >/dev/null 2>&1
  psql "$url" -qX -v ON_ERROR_STOP=1 \
    -c "INSERT INTO pgsched.nodes (node_id, epoch, lease_expires_at) VALUES ('n1', 1, now() + interval '1 day')" \
    -c "SELECT cardinality(pgsched.schedule_many(array_agg('o' || CASE WHEN $ids > 0 THEN i % $ids ELSE i END),
               array_agg(now() + make_interval(secs => i / 1000000.0)), payloads => array_agg(jsonb_build_object('n', i)),
               kinds => array_agg('k'::text))) FROM generate_series(1, $n) i" >/dev/null
  # Later commits fence a finish by its claim's claimed_at too; older
  # ones (800198c) take no claimed_ats.
  local ca=""
  if [ "$(psql "$url" -qAtX -c "SELECT 'claimed_ats' = ANY (proargnames) FROM pg_proc WHERE proname = 'finish_tasks' AND pronamespace = 'pgsched'::regnamespace")" = t ]; then
    ca="cas,"
  fi
  as_pg "$PGBIN/pg_ctl" -D "$data" -m fast stop >/dev/null
  # Own ordering_ids drain partitions in the order claims take them, so a
  # claim starts from the partition the last one ended in (a worker asks
  # only due partitions); ordered ones keep all 64.
  local trim=""
  [ "$ids" -eq 0 ] && trim="IF n > 0 THEN parts := parts[array_position(parts, p[n]):]; END IF;"
  cat > "$work/driver.sql" <<SQL
DO \$\$
DECLARE
    p integer[] := '{}'; o text[] := '{}'; ids bigint[] := '{}'; cas timestamptz[] := '{}'; n integer := 0;
    parts integer[] := ARRAY(SELECT generate_series(0, 63));
    np integer[]; no text[]; nids bigint[]; ncas timestamptz[]; r record;
BEGIN
    LOOP
        IF n < 400 THEN
            FOR r IN SELECT c.partition_id, c.ordering_id, c.id, c.claimed_at
                     FROM pgsched.claim_due_many('n1', 1, parts, 400 - n, 60) c LOOP
                p := p || r.partition_id; o := o || r.ordering_id; ids := ids || r.id; cas := cas || r.claimed_at; n := n + 1;
            END LOOP;
            $trim
        END IF;
        EXIT WHEN n = 0;
        np := '{}'; no := '{}'; nids := '{}'; ncas := '{}';
        FOR r IN SELECT f.* FROM pgsched.finish_tasks('n1', 1, p, o, ids, $ca array_fill('completed'::text, ARRAY[n]),
                                                      array_fill(0::float8, ARRAY[n]), array_fill(''::text, ARRAY[n]), n, parts, 1000) f
                 WHERE f.applied IS NULL LOOP
            np := np || r.partition_id; no := no || r.ordering_id; nids := nids || r.id; ncas := ncas || r.claimed_at;
        END LOOP;
        p := np; o := no; ids := nids; cas := ncas; n := cardinality(np);
        COMMIT;
    END LOOP;
END
\$\$;

SELECT count(*) AS left FROM pgsched.heads;

SQL
  chmod 644 "$work/driver.sql"
  local out="$DIR/callgrind.$v.$w"
  (cd "$work" && as_pg valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect=plpgsql_inline_handler \
     "$PGBIN/postgres" --single -j -D "$data" -c fsync=off postgres < "$work/driver.sql" > "$work/single.out" 2> "$work/valgrind.log")
  grep -q 'left = "0"' "$work/single.out" || { echo "sql-instructions: $v $w left tasks behind:" >&2; cat "$work/single.out" >&2; exit 1; }
  local ir
  ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/valgrind.log" | head -1)
  echo $((ir / n))
}

for w in $WORKLOADS; do
  ids=0 n=$N
  [ "$w" = ordered ] && ids=1000 n=$N_ORDERED
  old=$(count old "$w" "$ids" "$n"); new=$(count new "$w" "$ids" "$n")
  awk -v w="$w" -v o="$old" -v n="$new" 'BEGIN { printf "%s: instructions per task, base %d, new %d, new/base %.3f\n", w, o, n, n / o }'
done
echo "counts kept in $DIR: callgrind_annotate --inclusive=yes $DIR/callgrind.new.WORKLOAD"
