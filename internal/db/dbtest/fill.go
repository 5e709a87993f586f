// Package dbtest fills a jobs database with history for tests and the
// benchmark harness: many finished jobs written with plain SQL inserts,
// the rows the engine itself would have left behind, in a fraction of the
// time that starting them would take.
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/jmoiron/sqlx"
)

// Conn is what Fill writes through: a *db.DB, or a *sqlx.DB on a database
// that another build of jobs created (which db.Open would migrate).
type Conn interface {
	BeginTxx(ctx context.Context, opts *sql.TxOptions) (*sqlx.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// History describes the finished jobs Fill adds.
type History struct {
	Scope string
	Jobs  int
	// ChunkBytes is the size of each job's one output chunk (at least 1).
	ChunkBytes int
	// TTL is each job's ttl; 0 keeps them forever.
	TTL time.Duration
	// End is when the newest job ended; the others ended a second apart
	// before it. Zero means now.
	End time.Time
	// Batch is how many jobs go in one transaction; 0 means 5,000.
	Batch int
	// Events is how many events each job has: its three transitions
	// (created, running, done) and, past three, notes. 0 means 3.
	Events int
}

// Fill adds h.Jobs finished jobs to d, each with three events (created,
// running, done), h.Events-3 notes and one output chunk, as the engine
// records them.
func Fill(ctx context.Context, d Conn, h History) error {
	if h.Batch <= 0 {
		h.Batch = 5000
	}
	if h.ChunkBytes <= 0 {
		h.ChunkBytes = 1
	}
	if h.End.IsZero() {
		h.End = time.Now()
	}
	data := []byte(strings.Repeat("x", h.ChunkBytes-1) + "\n")
	for done := 0; done < h.Jobs; {
		n := min(h.Batch, h.Jobs-done)
		if err := fillBatch(ctx, d, h, done, n, data); err != nil {
			return fmt.Errorf("fill history: %w", err)
		}
		// The database's connections do not checkpoint by themselves:
		// keep the WAL from growing to the size of the history.
		if _, err := d.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return fmt.Errorf("fill history: %w", err)
		}
		done += n
	}
	return nil
}

// fillBatch adds jobs from … from+n-1 in one transaction. The rows are
// made by SQLite itself from a temporary table of the jobs' ids, times and
// commands, a few statements a batch rather than several a job: the
// engine's per-statement cost is what a history of thousands of jobs paid
// (minutes under the race detector).
func fillBatch(ctx context.Context, d Conn, h History, from, n int, data []byte) error {
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS fill_jobs
		(i INTEGER PRIMARY KEY, id TEXT, command TEXT, created TEXT, ended TEXT)`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM temp.fill_jobs`); err != nil {
		return err
	}
	const rows = 200 // 5 parameters a row, well under SQLite's limit
	for lo := from; lo < from+n; lo += rows {
		hi := min(lo+rows, from+n)
		var q strings.Builder
		q.WriteString(`INSERT INTO temp.fill_jobs (i, id, command, created, ended) VALUES `)
		args := make([]any, 0, 5*(hi-lo))
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?)")
			end := h.End.Add(-time.Duration(h.Jobs-1-i) * time.Second)
			args = append(args, i, db.NewID(), fmt.Sprintf("make test-%d", i),
				db.FormatTime(end.Add(-10*time.Millisecond)), db.FormatTime(end))
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, fillJobs, h.Scope, h.TTL.Milliseconds(), len(data)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fillEvents, h.Scope, max(h.Events-3, 0)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fillChunks, data); err != nil {
		return err
	}
	return tx.Commit()
}

const (
	fillJobs = `INSERT INTO jobs (id, scope, label, command, argv, cwd, status, exit_code, pid, pgid,
	created_at, started_at, ended_at, last_access_at, ttl_ms, output_bytes, output_lines, duration_ms)
	SELECT id, ?1, '', command, '["sh","-c","true"]', '/', 'done', 0, 1, 1, created, created, ended, ended, ?2, ?3, 1, 1
	FROM temp.fill_jobs ORDER BY i`
	// fillEvents: each job's three transitions, then its notes, job by
	// job, in the order the engine writes them.
	fillEvents = `WITH RECURSIVE notes(k) AS (SELECT 1 WHERE ?2 > 0 UNION ALL SELECT k + 1 FROM notes WHERE k < ?2),
	e(i, k, job_id, at, kind, from_status, to_status, detail) AS (
		SELECT i, 0, id, created, 'transition', NULL, 'starting', json_object('command', command, 'cwd', '/') FROM temp.fill_jobs
		UNION ALL SELECT i, 1, id, created, 'transition', 'starting', 'running', '{"pid":1}' FROM temp.fill_jobs
		UNION ALL SELECT i, 2, id, ended, 'transition', 'running', 'done', '{"exit_code":0}' FROM temp.fill_jobs
		UNION ALL SELECT i, 2 + k, id, ended, 'note', NULL, NULL, '{"message":"input delivered"}' FROM temp.fill_jobs, notes)
	INSERT INTO events (job_id, scope, at, kind, from_status, to_status, detail)
	SELECT job_id, ?1, at, kind, from_status, to_status, detail FROM e ORDER BY i, k`
	fillChunks = `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
	SELECT id, 0, 'stdout', 0, 0, 1, ended, ? FROM temp.fill_jobs ORDER BY i`
)
