-- version 12
-- Generated from the migrations: go test ./internal/db -run TestLatestSchemaIsTheMigrations -update
CREATE TABLE goose_db_version (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		version_id INTEGER NOT NULL,
		is_applied INTEGER NOT NULL,
		tstamp TIMESTAMP DEFAULT (datetime('now'))
	);
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
CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,          -- 64+ random bits, base32
    scope          TEXT NOT NULL,             -- owner (agent, conversation); verbs see only their scope
    name           TEXT,                      -- optional, unique among the scope's active jobs
    label          TEXT NOT NULL DEFAULT '',
    command        TEXT NOT NULL,             -- the command as the user gave it (display form)
    argv           TEXT NOT NULL CHECK (json_valid(argv)),      -- JSON array actually executed
    cwd            TEXT NOT NULL,
    env_names      TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(env_names)), -- names only, never values
    mode           TEXT NOT NULL DEFAULT 'pipe' CHECK (mode IN ('pipe', 'tmux', 'pty')),
    tmux_session   TEXT,                      -- tmux session name for mode = 'tmux'
    status         TEXT NOT NULL DEFAULT 'starting'
                   CHECK (status IN ('queued', 'starting', 'running', 'done', 'failed', 'killed', 'timed_out', 'lost')),
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
    max_rss_kb     INTEGER, stop_requested TEXT
    CHECK (stop_requested IN ('killed', 'timed_out')), keep_tmux INTEGER NOT NULL DEFAULT 0
    CHECK (keep_tmux IN (0, 1)), duration_ms INTEGER CHECK (duration_ms IS NULL OR duration_ms >= 0), survivors_gone INTEGER NOT NULL DEFAULT 0
    CHECK (survivors_gone IN (0, 1)), boot_id TEXT, end_ticks INTEGER CHECK (end_ticks IS NULL OR end_ticks >= 0), tmux_socket TEXT, queue TEXT, queue_priority INTEGER NOT NULL DEFAULT 0, queue_pos INTEGER, restarted_from TEXT,
    CHECK ((status IN ('done', 'failed', 'killed', 'timed_out', 'lost')) = (ended_at IS NOT NULL)),
    CHECK (status NOT IN ('running') OR started_at IS NOT NULL)
) STRICT;
CREATE TABLE chunks (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,                  -- 0, 1, 2 … per job
    stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr', 'pty')),
    byte_offset INTEGER NOT NULL CHECK (byte_offset >= 0),
    first_line  INTEGER NOT NULL CHECK (first_line >= 0),
    line_count  INTEGER NOT NULL CHECK (line_count >= 0), -- newlines inside data
    at     TEXT NOT NULL,
    data   BLOB NOT NULL
, size INTEGER, data_ref INTEGER) STRICT;
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
CREATE TABLE queues (
    scope      TEXT NOT NULL,
    name       TEXT NOT NULL CHECK (name <> ''),
    parallel   INTEGER NOT NULL DEFAULT 1 CHECK (parallel >= 1), -- jobs of the queue running at once
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)), -- 1: none of its jobs starts
    created_at TEXT NOT NULL,
    PRIMARY KEY (scope, name)
) STRICT;
CREATE TABLE job_deps (
    job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    after_id TEXT NOT NULL,
    ok       INTEGER NOT NULL DEFAULT 0 CHECK (ok IN (0, 1)),
    PRIMARY KEY (job_id, after_id)
) STRICT;
CREATE TABLE queued_starts (
    job_id  TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    request TEXT NOT NULL CHECK (json_valid(request))
) STRICT;
CREATE INDEX jobs_scope_created ON jobs (scope, created_at);
CREATE INDEX jobs_status ON jobs (status);
CREATE INDEX jobs_supervisor ON jobs (supervisor_id) WHERE status IN ('starting', 'running');
CREATE INDEX jobs_scope_name ON jobs (scope, name) WHERE name IS NOT NULL;
CREATE INDEX jobs_expiry ON jobs (last_access_at) WHERE ended_at IS NOT NULL AND ttl_ms > 0;
CREATE UNIQUE INDEX chunks_offset ON chunks (job_id, byte_offset);
CREATE INDEX chunks_line ON chunks (job_id, first_line);
CREATE INDEX events_job ON events (job_id, id);
CREATE INDEX events_scope ON events (scope, id);
CREATE INDEX events_at ON events (at);
CREATE INDEX jobs_created ON jobs (created_at);
CREATE INDEX jobs_queued ON jobs (supervisor_id, queue_priority DESC, queue_pos)
    WHERE status = 'queued';
CREATE UNIQUE INDEX jobs_active_name ON jobs (scope, name)
    WHERE name IS NOT NULL AND status IN ('queued', 'starting', 'running');
CREATE INDEX job_deps_after ON job_deps (after_id);
CREATE INDEX chunks_data_ref ON chunks (data_ref) WHERE data_ref IS NOT NULL;
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
    coalesce(duration_ms / 1000.0,
             round((julianday(coalesce(ended_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) - julianday(coalesce(started_at, created_at))) * 86400.0, 3)) AS duration_s,
    output_bytes,
    evicted_bytes,
    dropped_bytes,
    user_cpu_ms,
    sys_cpu_ms,
    max_rss_kb,
    supervisor_id
FROM jobs;
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
    max(j.output_bytes, coalesce(c.byte_offset + coalesce(c.size, length(c.data)), 0)) AS output_bytes,
    CASE WHEN c.at > coalesce(j.last_output_at, '') THEN c.at ELSE j.last_output_at END AS last_output_at,
    j.supervisor_id,
    s.pid AS supervisor_pid,
    s.host AS supervisor_host,
    s.ended_at AS supervisor_ended_at
FROM jobs j
LEFT JOIN supervisors s ON s.id = j.supervisor_id
LEFT JOIN chunks c ON c.job_id = j.id
    AND c.byte_offset = (SELECT max(byte_offset) FROM chunks WHERE job_id = j.id)
WHERE j.status IN ('starting', 'running');
