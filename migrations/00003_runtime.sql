-- +goose Up

-- duration_ms: how long a finished job ran, measured by the supervisor with
-- a monotonic clock. started_at and ended_at are wall-clock times for people
-- to read; their difference is wrong whenever the clock jumped (NTP, a
-- suspended laptop, a manual change) while the job ran.
ALTER TABLE jobs ADD COLUMN duration_ms INTEGER CHECK (duration_ms IS NULL OR duration_ms >= 0);

DROP VIEW job_summary;
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

-- +goose Down
DROP VIEW job_summary;
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

ALTER TABLE jobs DROP COLUMN duration_ms;
