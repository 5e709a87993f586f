-- +goose Up

-- Two values join the jobs table's CHECK constraints: the status 'queued'
-- (a job waiting for its turn in a queue, before 'starting') and the mode
-- 'pty' (a job in a pseudo-terminal of its supervisor). Widening a CHECK
-- changes nothing stored, so the table's definition is edited in place, as
-- SQLite documents for such changes, instead of copying every job to a
-- new table: a copy would take minutes on a long history, and dropping the
-- old table would delete every job's output through the chunks' foreign
-- key. The two DDL statements at the end move the schema cookie, so that
-- every open connection reads the new definition before its next
-- statement.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(replace(sql,
    'CHECK (mode IN (''pipe'', ''tmux''))',
    'CHECK (mode IN (''pipe'', ''tmux'', ''pty''))'),
    'CHECK (status IN (''starting'', ''running'',',
    'CHECK (status IN (''queued'', ''starting'', ''running'',')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x);
DROP TABLE schema_cookie_bump;

-- +goose Down
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(replace(sql,
    'CHECK (mode IN (''pipe'', ''tmux'', ''pty''))',
    'CHECK (mode IN (''pipe'', ''tmux''))'),
    'CHECK (status IN (''queued'', ''starting'', ''running'',',
    'CHECK (status IN (''starting'', ''running'',')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x);
DROP TABLE schema_cookie_bump;
