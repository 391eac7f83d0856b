-- A completed key must never run again while it could still be enqueued: a
-- key can be enqueued until grace after its scheduled time, and it may
-- complete up to a second before that time (claimed ahead), so its
-- tombstone must outlive grace by more than that second. The constraint
-- holds whatever writes settings; pgsched.configure says so in words.

-- +goose Up
ALTER TABLE pgsched.settings ADD CONSTRAINT completion_retention_longer_than_grace
    CHECK (completion_retention > grace + interval '1 second');
ALTER TABLE pgsched.settings ADD CONSTRAINT grace_not_negative CHECK (grace >= interval '0');

-- +goose Down
ALTER TABLE pgsched.settings DROP CONSTRAINT grace_not_negative;
ALTER TABLE pgsched.settings DROP CONSTRAINT completion_retention_longer_than_grace;
