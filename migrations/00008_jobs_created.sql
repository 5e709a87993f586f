-- +goose Up

-- jobs_created: every scope's jobs by creation time, for listings across
-- scopes (list --all-scopes): the newest page is read in index order and
-- the walk stops at its limit, however many jobs the history keeps.
CREATE INDEX jobs_created ON jobs (created_at);

-- +goose Down
DROP INDEX jobs_created;
