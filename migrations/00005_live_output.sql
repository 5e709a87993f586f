-- +goose Up

-- While a job runs, its row's output counters are advanced at most once a
-- second; its newest chunk is always exact. active_jobs shows the live end.
DROP VIEW active_jobs;
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
    max(j.output_bytes, coalesce(c.byte_offset + length(c.data), 0)) AS output_bytes,
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

-- +goose Down
DROP VIEW active_jobs;
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
