-- +goose Up

-- A chunk of a flood may be stored compressed: then size is the length of
-- the output it holds and data is one zstd frame of it. NULL (every row
-- written before this migration, and every row stored as is): data is the
-- output itself, length(data) bytes. Offsets, first_line and line_count
-- are always those of the output as written. No CHECK: adding a column
-- with one would read every stored chunk.
ALTER TABLE chunks ADD COLUMN size INTEGER;

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

-- +goose Down

-- The older schema cannot read compressed chunks: they go, and count as
-- evicted (as `jobs clear` counts what it deletes), so every read names
-- the gap.
UPDATE jobs SET evicted_bytes = evicted_bytes +
    (SELECT coalesce(sum(size), 0) FROM chunks WHERE chunks.job_id = jobs.id AND chunks.size IS NOT NULL)
WHERE id IN (SELECT job_id FROM chunks WHERE size IS NOT NULL);
DELETE FROM chunks WHERE size IS NOT NULL;

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

ALTER TABLE chunks DROP COLUMN size;
