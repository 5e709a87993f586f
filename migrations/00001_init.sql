-- +goose Up

-- supervisors: every process that has owned live children. A supervisor holds
-- an advisory lock on lock_path for its whole life; a free lock means it died.
CREATE TABLE supervisors (
    id          TEXT PRIMARY KEY,             -- random, like job ids
    pid         INTEGER NOT NULL,
    host        TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL CHECK (kind IN ('detached', 'embedded')),
    lock_path   TEXT NOT NULL,                -- flock held for the supervisor's lifetime
    socket_path TEXT NOT NULL DEFAULT '',     -- unix socket serving start/write/kill
    version     TEXT NOT NULL DEFAULT '',
    started_at  TEXT NOT NULL,                -- ISO-8601 UTC
    ended_at    TEXT                          -- set on clean exit or when found dead
) STRICT;

-- jobs: one row per job, from creation to deletion.
CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,          -- 64+ random bits, base32
    scope          TEXT NOT NULL,             -- owner (agent, conversation); verbs see only their scope
    name           TEXT,                      -- optional, unique among the scope's active jobs
    label          TEXT NOT NULL DEFAULT '',
    command        TEXT NOT NULL,             -- the command as the user gave it (display form)
    argv           TEXT NOT NULL CHECK (json_valid(argv)),      -- JSON array actually executed
    cwd            TEXT NOT NULL,
    env_names      TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(env_names)), -- names only, never values
    mode           TEXT NOT NULL DEFAULT 'pipe' CHECK (mode IN ('pipe', 'tmux')),
    tmux_session   TEXT,                      -- tmux session name for mode = 'tmux'
    status         TEXT NOT NULL DEFAULT 'starting'
                   CHECK (status IN ('starting', 'running', 'done', 'failed', 'killed', 'timed_out', 'lost')),
    exit_code      INTEGER,                   -- exit status; 128+n for death by signal n
    signal         TEXT,                      -- signal name when the main process died of one
    reason         TEXT,                      -- why it failed to start / was killed / was lost
    pid            INTEGER,
    pgid           INTEGER,
    pid_start      INTEGER,                   -- main process start time (clock ticks since boot), guards pid reuse
    supervisor_id  TEXT REFERENCES supervisors(id),
    stdin          TEXT NOT NULL DEFAULT 'pipe' CHECK (stdin IN ('pipe', 'closed', 'null')),
    color          INTEGER NOT NULL DEFAULT 0 CHECK (color IN (0, 1)),
    on_exit        TEXT NOT NULL DEFAULT '',  -- command run once at a terminal status
    created_at     TEXT NOT NULL,
    started_at     TEXT,
    ended_at       TEXT,
    last_access_at TEXT NOT NULL,             -- ttl counts from here once the job is finished
    timeout_ms     INTEGER NOT NULL DEFAULT 1800000 CHECK (timeout_ms >= 0), -- 0 = none
    ttl_ms         INTEGER NOT NULL DEFAULT 1800000 CHECK (ttl_ms >= 0),     -- 0 = keep forever
    max_output     INTEGER NOT NULL DEFAULT 67108864 CHECK (max_output >= 0), -- bytes retained; 0 = no cap
    output_bytes   INTEGER NOT NULL DEFAULT 0, -- bytes produced (absolute end offset)
    output_lines   INTEGER NOT NULL DEFAULT 0, -- newlines produced
    evicted_bytes  INTEGER NOT NULL DEFAULT 0, -- bytes dropped from the middle by the output cap
    dropped_bytes  INTEGER NOT NULL DEFAULT 0, -- bytes the database could not take (disk full, locked)
    last_output_at TEXT,
    read_cursor    INTEGER NOT NULL DEFAULT 0, -- byte offset where the next "new output" read starts
    user_cpu_ms    INTEGER,
    sys_cpu_ms     INTEGER,
    max_rss_kb     INTEGER,
    CHECK ((status IN ('done', 'failed', 'killed', 'timed_out', 'lost')) = (ended_at IS NOT NULL)),
    CHECK (status NOT IN ('running') OR started_at IS NOT NULL)
) STRICT;

CREATE INDEX jobs_scope_created ON jobs (scope, created_at);
CREATE INDEX jobs_status ON jobs (status);
CREATE INDEX jobs_supervisor ON jobs (supervisor_id) WHERE status IN ('starting', 'running');
CREATE INDEX jobs_scope_name ON jobs (scope, name) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX jobs_active_name ON jobs (scope, name)
    WHERE name IS NOT NULL AND status IN ('starting', 'running');
CREATE INDEX jobs_expiry ON jobs (last_access_at) WHERE ended_at IS NOT NULL AND ttl_ms > 0;

-- chunks: all output, in order. byte_offset is the absolute offset of data in
-- the job's combined output; first_line is the number of newlines before it
-- (so the chunk holds lines first_line .. first_line+line_count, 0-based).
CREATE TABLE chunks (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,                  -- 0, 1, 2 … per job
    stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr', 'pty')),
    byte_offset INTEGER NOT NULL CHECK (byte_offset >= 0),
    first_line  INTEGER NOT NULL CHECK (first_line >= 0),
    line_count  INTEGER NOT NULL CHECK (line_count >= 0), -- newlines inside data
    at     TEXT NOT NULL,
    data   BLOB NOT NULL
) STRICT;

CREATE UNIQUE INDEX chunks_offset ON chunks (job_id, byte_offset);
CREATE INDEX chunks_line ON chunks (job_id, first_line);

-- events: the audit trail. Every status transition is a row; so are notes
-- such as output the database could not take or an exit hook's failure.
-- No foreign key: events outlive their job and have their own retention.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT, -- the cursor for `jobs events --since`
    job_id      TEXT NOT NULL,
    scope       TEXT NOT NULL,
    at          TEXT NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'transition'
                CHECK (kind IN ('transition', 'output_dropped', 'hook', 'note')),
    from_status TEXT,
    to_status   TEXT,
    detail      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail)),
    CHECK (kind <> 'transition' OR to_status IS NOT NULL)
) STRICT;

CREATE INDEX events_job ON events (job_id, id);
CREATE INDEX events_scope ON events (scope, id);
CREATE INDEX events_at ON events (at);

-- job_summary: one readable row per job for audits.
CREATE VIEW job_summary AS
SELECT
    id,
    scope,
    coalesce(name, '') AS name,
    label,
    status,
    exit_code,
    command,
    cwd,
    created_at,
    started_at,
    ended_at,
    round((julianday(coalesce(ended_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) - julianday(coalesce(started_at, created_at))) * 86400.0, 3) AS duration_s,
    output_bytes,
    evicted_bytes,
    dropped_bytes,
    user_cpu_ms,
    sys_cpu_ms,
    max_rss_kb,
    supervisor_id
FROM jobs;

-- job_history: the audit trail, one row per event, with the job's command.
-- The command comes from the job row while it exists and from the creation
-- event's detail after the job was deleted.
CREATE VIEW job_history AS
SELECT
    e.id AS event_id,
    e.at,
    e.job_id,
    e.scope,
    e.kind,
    e.from_status,
    e.to_status,
    e.detail,
    coalesce(j.command, (
        SELECT json_extract(c.detail, '$.command')
        FROM events c
        WHERE c.job_id = e.job_id AND c.kind = 'transition' AND c.from_status IS NULL
        ORDER BY c.id LIMIT 1
    )) AS command
FROM events e
LEFT JOIN jobs j ON j.id = e.job_id;

-- active_jobs: jobs that may have live processes, with their supervisor.
-- supervisor_ended_at set while a job is still active means the supervisor
-- died and nobody has marked its jobs lost yet.
CREATE VIEW active_jobs AS
SELECT
    j.id,
    j.scope,
    coalesce(j.name, '') AS name,
    j.status,
    j.pid,
    j.pgid,
    j.command,
    j.created_at,
    j.started_at,
    round((julianday('now') - julianday(coalesce(j.started_at, j.created_at))) * 86400.0, 3) AS running_s,
    j.output_bytes,
    j.last_output_at,
    j.supervisor_id,
    s.pid AS supervisor_pid,
    s.host AS supervisor_host,
    s.ended_at AS supervisor_ended_at
FROM jobs j
LEFT JOIN supervisors s ON s.id = j.supervisor_id
WHERE j.status IN ('starting', 'running');

-- scope_daily: per scope and UTC day, what happened, counted from the events
-- (so jobs deleted after their ttl still count, for the events' retention).
CREATE VIEW scope_daily AS
SELECT
    scope,
    substr(at, 1, 10) AS day,
    sum(kind = 'transition' AND from_status IS NULL) AS created,
    sum(kind = 'transition' AND to_status = 'done') AS done,
    sum(kind = 'transition' AND to_status = 'failed') AS failed,
    sum(kind = 'transition' AND to_status = 'killed') AS killed,
    sum(kind = 'transition' AND to_status = 'timed_out') AS timed_out,
    sum(kind = 'transition' AND to_status = 'lost') AS lost,
    sum(kind = 'output_dropped') AS output_dropped_events
FROM events
GROUP BY scope, day;

-- +goose Down
DROP VIEW scope_daily;
DROP VIEW active_jobs;
DROP VIEW job_history;
DROP VIEW job_summary;
DROP TABLE events;
DROP TABLE chunks;
DROP TABLE jobs;
DROP TABLE supervisors;
