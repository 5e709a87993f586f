-- +goose Up

-- The bytes of a chunk may be stored in the output data file beside the
-- database (jobs.db-output, 64 KiB pages; internal/db/outputfile.go):
-- then data_ref is the id of its row in that file's chunk_data table, data
-- is empty and size is the length of the output it holds. NULL (every row
-- written before this migration, and every row stored here): data holds
-- the bytes, as before.
ALTER TABLE chunks ADD COLUMN data_ref INTEGER;
CREATE INDEX chunks_data_ref ON chunks (data_ref) WHERE data_ref IS NOT NULL;

-- +goose Down

-- The older schema cannot read bytes it does not know where to find: the
-- chunks that name the output data file go, and count as evicted (as
-- `jobs clear` counts what it deletes), so every read names the gap.
UPDATE jobs SET evicted_bytes = evicted_bytes +
    (SELECT coalesce(sum(size), 0) FROM chunks WHERE chunks.job_id = jobs.id AND chunks.data_ref IS NOT NULL)
WHERE id IN (SELECT job_id FROM chunks WHERE data_ref IS NOT NULL);
DELETE FROM chunks WHERE data_ref IS NOT NULL;
DROP INDEX chunks_data_ref;
ALTER TABLE chunks DROP COLUMN data_ref;
