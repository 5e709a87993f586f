-- +goose Up

-- stop_requested: why the job is being ended on purpose, set by whoever
-- kills it (or times it out) before it signals. The process that records the
-- job's exit may be another one — for a tmux job it is the tmux-pipe helper,
-- which outlives supervisors — so the intent has to live in the row, not in
-- the killer's memory. NULL while nobody has asked the job to stop.
ALTER TABLE jobs ADD COLUMN stop_requested TEXT
    CHECK (stop_requested IN ('killed', 'timed_out'));

-- keep_tmux: leave a tmux job's session open after the job ends, so that a
-- person can still read the screen (`jobs start --tmux --keep-tmux`).
ALTER TABLE jobs ADD COLUMN keep_tmux INTEGER NOT NULL DEFAULT 0
    CHECK (keep_tmux IN (0, 1));

-- +goose Down
ALTER TABLE jobs DROP COLUMN keep_tmux;
ALTER TABLE jobs DROP COLUMN stop_requested;
