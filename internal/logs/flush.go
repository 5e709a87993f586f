package logs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

const (
	insertChunk = `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

	// updateJob advances the job's counters and returns the bytes it
	// retains, which the cap is checked against.
	updateJob = `UPDATE jobs SET output_bytes = ?1, output_lines = ?2,
		last_output_at = coalesce(?3, last_output_at), dropped_bytes = dropped_bytes + ?4
		WHERE id = ?5
		RETURNING output_bytes - evicted_bytes - dropped_bytes`

	// evictable lists the chunks past the head, oldest first.
	evictable = `SELECT byte_offset, length(data) FROM chunks
		WHERE job_id = ? AND byte_offset >= ? ORDER BY byte_offset`

	deleteChunks = `DELETE FROM chunks WHERE job_id = ? AND byte_offset >= ? AND byte_offset <= ?`

	addEvicted = `UPDATE jobs SET evicted_bytes = evicted_bytes + ? WHERE id = ?`
)

// flushStmts are the statements of one flush, prepared on its connection.
type flushStmts struct {
	insert, update *sql.Stmt
}

// writeBatch writes batch in one IMMEDIATE transaction on a connection of
// its own. The wait for the write lock is bounded by BusyTimeout. A job whose
// statements fail on a constraint is rolled back to its savepoint and counted
// as dropped alone, so one bad job does not cost the others their output;
// any other error fails the whole batch.
//
// While a flood keeps MaxBatchBytes queued, the transaction takes the next
// batches too (appending them to *batch), for at most 4 × FlushInterval, so
// that a trickle of another job still becomes visible soon.
func (a *Appender) writeBatch(batch *[]jobBatch) (err error) {
	// Statements run under a context that is never cancelled: once the
	// transaction holds the lock, abandoning it half way helps no one.
	ctx := context.Background()
	conn, err := a.d.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer conn.Close()

	lockCtx, cancel := context.WithTimeout(ctx, a.o.BusyTimeout)
	_, err = conn.ExecContext(lockCtx, "BEGIN IMMEDIATE")
	cancel()
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
		}
	}()

	var st flushStmts
	if st.insert, err = conn.PrepareContext(ctx, insertChunk); err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	defer st.insert.Close()
	if st.update, err = conn.PrepareContext(ctx, updateJob); err != nil {
		return fmt.Errorf("prepare update: %w", err)
	}
	defer st.update.Close()

	txStart := time.Now()
	for i := 0; ; i++ {
		if i == len(*batch) {
			if time.Since(txStart) >= 4*a.o.FlushInterval {
				break
			}
			more := a.takeMore()
			if len(more) == 0 {
				break
			}
			*batch = append(*batch, more...)
		}
		b := &(*batch)[i]
		b.gone, b.failed = false, nil
		if _, err = conn.ExecContext(ctx, "SAVEPOINT job"); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		err = a.writeJob(ctx, conn, &st, b)
		if err != nil && isConstraint(err) {
			if _, rerr := conn.ExecContext(ctx, "ROLLBACK TO job"); rerr != nil {
				return fmt.Errorf("write output: %w", rerr)
			}
			b.failed, err = err, nil
		}
		if err != nil {
			return fmt.Errorf("write output of job %s: %w", b.st.id, err)
		}
		if _, err = conn.ExecContext(ctx, "RELEASE job"); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if _, err = conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit output: %w", err)
	}
	return nil
}

// writeJob writes one job's chunks, advances its row and evicts the middle
// of its output when it retains more than its cap.
func (a *Appender) writeJob(ctx context.Context, conn *sql.Conn, st *flushStmts, b *jobBatch) error {
	var last any
	if len(b.chunks) > 0 {
		last = db.FormatTime(b.last)
	}
	var retained int64
	err := st.update.QueryRowContext(ctx, b.end, b.lines, last, b.dropped, b.st.id).Scan(&retained)
	if errors.Is(err, sql.ErrNoRows) {
		b.gone = true // deleted (jobs rm) while running: nothing to keep
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range b.chunks {
		if _, err := st.insert.ExecContext(ctx, b.st.id, c.seq, string(c.stream), c.off,
			c.firstLine, c.lineCount, db.FormatTime(c.at), c.data); err != nil {
			return err
		}
	}
	if b.st.maxOutput == 0 || retained <= b.st.maxOutput || len(b.chunks) == 0 {
		return nil
	}
	return evict(ctx, conn, b.st.id, b.st.head, b.chunks[len(b.chunks)-1].off, retained-b.st.maxOutput)
}

// evict deletes the oldest chunks at or past head, but never the newest
// chunk (at newest), until excess bytes are gone, and counts them.
func evict(ctx context.Context, conn *sql.Conn, jobID string, head, newest, excess int64) error {
	rows, err := conn.QueryContext(ctx, evictable, jobID, head)
	if err != nil {
		return err
	}
	var freed, lastOff int64
	n := 0
	for rows.Next() && freed < excess {
		var off, size int64
		if err := rows.Scan(&off, &size); err != nil {
			rows.Close()
			return err
		}
		if off >= newest {
			break
		}
		freed += size
		lastOff = off
		n++
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, deleteChunks, jobID, head, lastOff); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, addEvicted, freed, jobID)
	return err
}

// isConstraint reports whether err is SQLite's SQLITE_CONSTRAINT family:
// the statement broke a rule of the schema, which is the job's problem, not
// the database's.
func isConstraint(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 19
}
