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

const (
	insertJob = `INSERT INTO jobs (id, scope, label, command, argv, cwd, status, exit_code, pid, pgid,
	created_at, started_at, ended_at, last_access_at, ttl_ms, output_bytes, output_lines, duration_ms)
	VALUES (?, ?, '', ?, '["sh","-c","true"]', '/', 'done', 0, 1, 1, ?, ?, ?, ?, ?, ?, 1, 1)`
	insertEvent = `INSERT INTO events (job_id, scope, at, kind, from_status, to_status, detail)
	VALUES (?, ?, ?, 'transition', ?, ?, ?)`
	insertNote = `INSERT INTO events (job_id, scope, at, kind, detail)
	VALUES (?, ?, ?, 'note', '{"message":"input delivered"}')`
	insertChunk = `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
	VALUES (?, 0, 'stdout', 0, 0, 1, ?, ?)`
)

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

func fillBatch(ctx context.Context, d Conn, h History, from, n int, data []byte) error {
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := from; i < from+n; i++ {
		id := db.NewID()
		end := h.End.Add(-time.Duration(h.Jobs-1-i) * time.Second)
		created, ended := db.FormatTime(end.Add(-10*time.Millisecond)), db.FormatTime(end)
		cmd := fmt.Sprintf("make test-%d", i)
		if _, err := tx.ExecContext(ctx, insertJob, id, h.Scope, cmd, created, created, ended, ended,
			h.TTL.Milliseconds(), len(data)); err != nil {
			return err
		}
		for _, e := range []struct {
			from, to any
			at       string
			detail   string
		}{
			{nil, "starting", created, fmt.Sprintf(`{"command":%q,"cwd":"/"}`, cmd)},
			{"starting", "running", created, `{"pid":1}`},
			{"running", "done", ended, `{"exit_code":0}`},
		} {
			if _, err := tx.ExecContext(ctx, insertEvent, id, h.Scope, e.at, e.from, e.to, e.detail); err != nil {
				return err
			}
		}
		for k := 3; k < h.Events; k++ {
			if _, err := tx.ExecContext(ctx, insertNote, id, h.Scope, ended); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, insertChunk, id, ended, data); err != nil {
			return err
		}
	}
	return tx.Commit()
}
