-- +goose Up

-- survivors_gone: set once a reader has seen that no process of a finished
-- job is alive any more. Counting them means scanning every process on the
-- machine; once none is left none can come back (only a live process of the
-- job could start one), so later reads skip the scan.
ALTER TABLE jobs ADD COLUMN survivors_gone INTEGER NOT NULL DEFAULT 0
    CHECK (survivors_gone IN (0, 1));

-- +goose Down
ALTER TABLE jobs DROP COLUMN survivors_gone;
