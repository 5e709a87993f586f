-- +goose Up

-- Queues: a job may wait in status 'queued' for its turn before it starts.
-- queue is the named queue it waits in ('' for the scope's own: it waits
-- only for the scope's running cap and its dependencies); queue_priority
-- orders a queue, higher first; queue_pos orders equal priorities, lower
-- first (creation order; moving a job to the front gives it a lower one).
-- restarted_from names the job that `jobs restart` copied.
ALTER TABLE jobs ADD COLUMN queue TEXT;
ALTER TABLE jobs ADD COLUMN queue_priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN queue_pos INTEGER;
ALTER TABLE jobs ADD COLUMN restarted_from TEXT;

-- The queued jobs in the order they start, per supervisor that owns them.
CREATE INDEX jobs_queued ON jobs (supervisor_id, queue_priority DESC, queue_pos)
    WHERE status = 'queued';

-- A queued job holds its name like an active one: its start must not find
-- the name taken by a job started meanwhile.
DROP INDEX jobs_active_name;
CREATE UNIQUE INDEX jobs_active_name ON jobs (scope, name)
    WHERE name IS NOT NULL AND status IN ('queued', 'starting', 'running');

-- queues: the named queues of each scope. A job started with a queue name
-- that has no row gets one with parallel 1.
CREATE TABLE queues (
    scope      TEXT NOT NULL,
    name       TEXT NOT NULL CHECK (name <> ''),
    parallel   INTEGER NOT NULL DEFAULT 1 CHECK (parallel >= 1), -- jobs of the queue running at once
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)), -- 1: none of its jobs starts
    created_at TEXT NOT NULL,
    PRIMARY KEY (scope, name)
) STRICT;

-- job_deps: a queued job starts only once every job it comes after has
-- ended; with ok = 1 only if that job ended done, otherwise it fails with
-- the reason "dependency X failed". after_id has no foreign key: the job
-- it names may expire first.
CREATE TABLE job_deps (
    job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    after_id TEXT NOT NULL,
    ok       INTEGER NOT NULL DEFAULT 0 CHECK (ok IN (0, 1)),
    PRIMARY KEY (job_id, after_id)
) STRICT;
CREATE INDEX job_deps_after ON job_deps (after_id);

-- queued_starts: what a queued job's start needs beyond its row, kept only
-- while it waits (deleted when it leaves status 'queued'): the start
-- request, environment values included, so that a supervisor started after
-- a crash can start it as asked.
CREATE TABLE queued_starts (
    job_id  TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    request TEXT NOT NULL CHECK (json_valid(request))
) STRICT;

-- +goose Down
DROP TABLE queued_starts;
DROP INDEX job_deps_after;
DROP TABLE job_deps;
DROP TABLE queues;
DROP INDEX jobs_active_name;
CREATE UNIQUE INDEX jobs_active_name ON jobs (scope, name)
    WHERE name IS NOT NULL AND status IN ('starting', 'running');
DROP INDEX jobs_queued;
ALTER TABLE jobs DROP COLUMN restarted_from;
ALTER TABLE jobs DROP COLUMN queue_pos;
ALTER TABLE jobs DROP COLUMN queue_priority;
ALTER TABLE jobs DROP COLUMN queue;
