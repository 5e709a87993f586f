package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// The output counters of the jobs row.
//
// Package logs stores a job's output as chunk rows and keeps the counters
// of the job's row (output_bytes, output_lines, last_output_at,
// evicted_bytes, dropped_bytes) up to date; the statements that read and
// write those counters are here, run on the connection or transaction
// that logs gives them, so that its chunks and the row change together: the
// appender's own connection (a *sql.Conn, in its write transaction) or a
// transaction (a *sql.Tx). They take those types, not an interface, so
// that a read allocates no more than the statement itself.

// MaxRunRows is the most rows one multi-row statement of this package or
// of logs writes (for a chunk's 8 parameters, 512, far below SQLite's
// 32766). A flush of many jobs trickling a few lines each was dominated by
// per-statement cost: with a SAVEPOINT, an UPDATE, an INSERT and a RELEASE
// per job, one flush of 100 jobs took 6.4 ms of CPU
// (BenchmarkTrickle100Jobs), 12 times the raw insert of the same rows.
// Runs are cut into powers of two, so that 7 statement shapes of each kind
// serve every size and stay prepared.
const MaxRunRows = 64

// Runs cuts n items into runs of a power of two, at most MaxRunRows each,
// and calls fn with each run's bounds, stopping at an error.
func Runs(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		hi := lo + min(MaxRunRows, 1<<(bits.Len(uint(n-lo))-1))
		if err := fn(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// RunsWithin is Runs whose runs also hold at most budget of what size
// gives an item (a run holds at least one item, whatever its size).
func RunsWithin(n int, size func(i int) int, budget int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		k, sum := 0, 0
		for k < MaxRunRows && lo+k < n && (k == 0 || sum+size(lo+k) <= budget) {
			sum += size(lo + k)
			k++
		}
		hi := lo + 1<<(bits.Len(uint(k))-1)
		if err := fn(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// countRuns is Runs for statements that count what they touch: it returns
// the sum of count over the runs.
func countRuns(n int, count func(lo, hi int) (int64, error)) (int64, error) {
	var total int64
	err := Runs(n, func(lo, hi int) error {
		k, err := count(lo, hi)
		total += k
		return err
	})
	return total, err
}

// ValuesSQL is n rows of width placeholders for a VALUES list.
func ValuesSQL(n, width int) string {
	row := "(?" + strings.Repeat(",?", width-1) + ")"
	return row + strings.Repeat(","+row, n-1)
}

// execCount runs query on conn and returns how many rows it changed.
func execCount(ctx context.Context, conn *sql.Conn, query string, args []any) (int64, error) {
	res, err := conn.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// The end of a job's output as its newest chunk row has it. While a job
// runs, the appender advances the counters of its jobs row only now and
// then (logs.DefaultRowEvery); the newest chunk, always written with the
// output, is never behind. A terminal status records the final counts in
// the row.
const (
	// ChunkSize is the length of the output a chunk row holds, in SQL: its
	// size column when its data is stored compressed, else its data's
	// length (see package logs, codec.go).
	ChunkSize = `coalesce(size, length(data))`

	newestChunk   = ` FROM chunks WHERE job_id = jobs.id ORDER BY byte_offset DESC LIMIT 1)`
	liveEndSQL    = `(SELECT byte_offset + ` + ChunkSize + newestChunk
	liveLinesSQL  = `(SELECT first_line + line_count` + newestChunk
	liveAtSQL     = `(SELECT at` + newestChunk
	liveOutputSQL = `SELECT byte_offset + ` + ChunkSize + `, first_line + line_count, at
	FROM chunks WHERE job_id = ? ORDER BY byte_offset DESC LIMIT 1`

	// liveOutputBytes and liveOutputLines are SQL expressions over a row
	// of the table jobs, not aliased: its output_bytes and output_lines
	// brought up to its newest chunk. Every query that needs the end of a
	// running job's output uses them.
	liveOutputBytes = `max(output_bytes, coalesce(` + liveEndSQL + `, 0))`
	liveOutputLines = `max(output_lines, coalesce(` + liveLinesSQL + `, 0))`
)

// OutputCounters are a job's output counters, brought up to its newest
// chunk.
type OutputCounters struct {
	Bytes, Lines, Evicted, Dropped int64
}

const outputCountersQuery = `SELECT ` + liveOutputBytes + `, ` + liveOutputLines + `,
	evicted_bytes, dropped_bytes FROM jobs WHERE id = ?`

// ReadOutputCounters reads the output counters of job id into c, in tx (a
// read transaction, for a snapshot); ok is false when the job does not
// exist.
func ReadOutputCounters(ctx context.Context, tx *sql.Tx, id string, c *OutputCounters) (ok bool, err error) {
	err = tx.QueryRowContext(ctx, outputCountersQuery, id).Scan(&c.Bytes, &c.Lines, &c.Evicted, &c.Dropped)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// OutputResume is where an appender goes on with a job's output.
type OutputResume struct {
	RowBytes int64 // output_bytes as the row has it
	Bytes    int64 // the end of the output: the newest chunk's, or the row's when bytes were dropped after it
	Lines    int64
	Unkept   int64 // evicted_bytes + dropped_bytes
	NextSeq  int64 // seq of the next chunk
}

// The output goes on at the end of the newest chunk, which the row's
// counters may lag, or at the row's end when bytes were dropped after that
// chunk.
const outputResumeQuery = `SELECT output_bytes, ` + liveOutputBytes + `, ` + liveOutputLines + `,
	evicted_bytes + dropped_bytes,
	coalesce((SELECT seq + 1 FROM chunks WHERE job_id = ?1 ORDER BY byte_offset DESC LIMIT 1), 0)
	FROM jobs WHERE id = ?1`

// ResumeOutput reads where the output of job id goes on; ok is false when
// the job does not exist.
func (d *DB) ResumeOutput(ctx context.Context, id string) (r OutputResume, ok bool, err error) {
	err = d.QueryRowContext(ctx, outputResumeQuery, id).Scan(&r.RowBytes, &r.Bytes, &r.Lines, &r.Unkept, &r.NextSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return OutputResume{}, false, nil
	}
	return r, err == nil, err
}

const evictAllQuery = `UPDATE jobs SET output_bytes = ` + liveOutputBytes + `,
	output_lines = ` + liveOutputLines + `, evicted_bytes = ` + liveOutputBytes + ` - dropped_bytes
	WHERE id = ?`

// EvictAllOutput counts everything job id stored so far as evicted, its
// counters brought up to the newest chunk first; the caller deletes the
// chunks in the same transaction tx. ok is false when the job does not
// exist.
func EvictAllOutput(ctx context.Context, tx *sql.Tx, id string) (ok bool, err error) {
	res, err := tx.ExecContext(ctx, evictAllQuery, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// OutputAdvance is what a flush of a job's output sets in its row.
type OutputAdvance struct {
	JobID        string
	Bytes, Lines int64     // output_bytes, output_lines
	LastAt       time.Time // last_output_at; zero keeps it
	Dropped      int64     // added to dropped_bytes
}

func (a *OutputAdvance) lastAt() any {
	if a.LastAt.IsZero() {
		return nil
	}
	return FormatTime(a.LastAt)
}

// advanceOutputQuery advances one row and returns the bytes it retains,
// which the cap is checked against.
const advanceOutputQuery = `UPDATE jobs SET output_bytes = ?1, output_lines = ?2,
	last_output_at = coalesce(?3, last_output_at), dropped_bytes = dropped_bytes + ?4
	WHERE id = ?5
	RETURNING output_bytes - evicted_bytes - dropped_bytes`

// AdvanceOutput sets a's counters in its job's row on conn and returns the
// bytes the job retains; ok is false when the row is gone.
func AdvanceOutput(ctx context.Context, conn *sql.Conn, a OutputAdvance) (retained int64, ok bool, err error) {
	err = conn.QueryRowContext(ctx, advanceOutputQuery, a.Bytes, a.Lines, a.lastAt(), a.Dropped, a.JobID).Scan(&retained)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return retained, err == nil, err
}

// advanceOutputsSQL is advanceOutputQuery for n jobs at once, without
// reading back what each retains: RETURNING costs a result row per job,
// and only a job near its cap needs the figure (ReadUnkept). OR FAIL: a
// multi-row statement that may be rolled back half way makes SQLite keep
// a statement journal.
func advanceOutputsSQL(n int) string {
	return `UPDATE OR FAIL jobs SET output_bytes = v.column2, output_lines = v.column3,
		last_output_at = coalesce(v.column4, last_output_at), dropped_bytes = dropped_bytes + v.column5
		FROM (VALUES ` + ValuesSQL(n, 5) + `) AS v WHERE jobs.id = v.column1`
}

// AdvanceOutputs sets the counters of many jobs' rows on conn, a run of
// statements of up to MaxRunRows rows each, and returns how many rows it
// found.
func AdvanceOutputs(ctx context.Context, conn *sql.Conn, as []OutputAdvance) (int64, error) {
	args := make([]any, 0, 5*min(len(as), MaxRunRows))
	return countRuns(len(as), func(lo, hi int) (int64, error) {
		args = args[:0]
		for i := lo; i < hi; i++ {
			a := &as[i]
			args = append(args, a.JobID, a.Bytes, a.Lines, a.lastAt(), a.Dropped)
		}
		return execCount(ctx, conn, advanceOutputsSQL(hi-lo), args)
	})
}

// countJobsSQL counts the jobs rows among n ids.
func countJobsSQL(n int) string {
	return `SELECT count(*) FROM jobs WHERE id IN ` + ValuesSQL(1, n)
}

// CountJobRows counts on conn the jobs rows among ids.
func CountJobRows(ctx context.Context, conn *sql.Conn, ids []string) (int64, error) {
	args := make([]any, 0, min(len(ids), MaxRunRows))
	return countRuns(len(ids), func(lo, hi int) (int64, error) {
		args = args[:0]
		for _, id := range ids[lo:hi] {
			args = append(args, id)
		}
		var k int64
		err := conn.QueryRowContext(ctx, countJobsSQL(hi-lo), args...).Scan(&k)
		return k, err
	})
}

// JobRowExists reports on conn whether job id's row exists.
func JobRowExists(ctx context.Context, conn *sql.Conn, id string) (bool, error) {
	var one int
	err := conn.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ReadUnkept reads on conn what job id's row says is not retained
// (evicted_bytes + dropped_bytes). The row's output_bytes may lag; the
// writer knows the end.
func ReadUnkept(ctx context.Context, conn *sql.Conn, id string) (int64, error) {
	var n int64
	if err := conn.QueryRowContext(ctx, `SELECT evicted_bytes + dropped_bytes FROM jobs WHERE id = ?`, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("read retained output: %w", err)
	}
	return n, nil
}

// AddEvicted adds n to job id's evicted_bytes on conn.
func AddEvicted(ctx context.Context, conn *sql.Conn, id string, n int64) error {
	_, err := conn.ExecContext(ctx, `UPDATE jobs SET evicted_bytes = evicted_bytes + ? WHERE id = ?`, n, id)
	return err
}
