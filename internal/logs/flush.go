package logs

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
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

	// unkeptQuery is what the jobs row says is not retained: the row's
	// output_bytes may lag (see DefaultRowEvery); the writer knows the end.
	unkeptQuery = `SELECT evicted_bytes + dropped_bytes FROM jobs WHERE id = ?`

	// growChunk extends a job's newest row (see GrowChunk).
	growChunk = `UPDATE chunks SET data = CAST(data || ? AS BLOB), line_count = line_count + ?, at = ?
		WHERE job_id = ? AND byte_offset = ?`
)

// groupRows is the most jobs one UPDATE and the most chunks one INSERT
// write (8 parameters a chunk: 512, far below SQLite's 32766). A flush of
// many jobs trickling a few lines each was dominated by per-statement cost:
// with a SAVEPOINT, an UPDATE, an INSERT and a RELEASE per job, one flush
// of 100 jobs took 6.4 ms of CPU (BenchmarkTrickle100Jobs), 12 times the
// raw insert of the same rows. Groups are cut into powers of two, so that
// 7 statement shapes of each kind serve every size and stay prepared.
const groupRows = 64

// pow2Runs cuts n items into runs of a power of two, at most groupRows
// each, and calls fn with each run's bounds, stopping at an error.
func pow2Runs(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		hi := lo + min(groupRows, 1<<(bits.Len(uint(n-lo))-1))
		if err := fn(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// countRuns is pow2Runs for statements that count what they touch: it
// returns the sum of count over the runs.
func countRuns(n int, count func(lo, hi int) (int64, error)) (int64, error) {
	var total int64
	err := pow2Runs(n, func(lo, hi int) error {
		k, err := count(lo, hi)
		total += k
		return err
	})
	return total, err
}

// values is n rows of width placeholders for a VALUES list.
func values(n, width int) string {
	row := "(?" + strings.Repeat(",?", width-1) + ")"
	return row + strings.Repeat(","+row, n-1)
}

// writerCacheKiB is the page cache of the appender's connection: a flood's
// transaction (at most MaxPendingBytes, 8 MiB, by default) fits in it
// whole. With SQLite's default 2 MiB, a transaction spilled its pages to
// the WAL half way and wrote some of them twice. Smaller transactions with
// this cache write as fast as the larger ones did, for less pending output
// and so about the same memory.
const writerCacheKiB = 10 << 10

// maxTxSpan bounds how long a transaction goes on taking batches under a
// flood (four flush intervals of the grid it was first tuned with).
const maxTxSpan = 200 * time.Millisecond

// writer is the appender's own connection with its prepared statements,
// kept from one flush to the next: preparing a 64-row statement costs more
// than running it. It is used only by the holder of a.flushing.
type writer struct {
	conn           *sql.Conn
	insert, update *sql.Stmt // single-row, for the job-by-job path
	multi          map[string]*sql.Stmt
	busy           time.Duration // the connection's busy timeout
}

// setBusy sets the connection's busy timeout: how long BEGIN waits for
// another writer's lock.
func (w *writer) setBusy(ctx context.Context, d time.Duration) error {
	if w.busy == d {
		return nil
	}
	if _, err := w.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", d.Milliseconds())); err != nil {
		return err
	}
	w.busy = d
	return nil
}

func (w *writer) prepare(ctx context.Context, query string) (*sql.Stmt, error) {
	if s := w.multi[query]; s != nil {
		return s, nil
	}
	s, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.multi[query] = s
	return s, nil
}

func (w *writer) close() {
	for _, s := range []*sql.Stmt{w.insert, w.update} {
		if s != nil {
			s.Close()
		}
	}
	for _, s := range w.multi {
		s.Close()
	}
	discard(w.conn) // its foreign keys are off
}

// writerLocked returns the appender's connection, opening it if needed;
// the caller holds a.flushing.
func (a *Appender) writerLocked(ctx context.Context) (*writer, error) {
	if a.w != nil {
		return a.w, nil
	}
	conn, err := a.d.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("get connection: %w", err)
	}
	// A multi-row statement that may fail half way makes SQLite copy every
	// page it touches to a statement journal (64 KiB a page, spilled to a
	// temporary file: a third of a flush's CPU in BenchmarkTrickle100Jobs),
	// and an immediate foreign key always counts as such a failure; OR
	// FAIL takes care of the other constraints. The one foreign key
	// (chunks.job_id) cannot be broken here: every flush writes a job's
	// chunks only after its UPDATE found the jobs row, in the same write
	// transaction, so the row cannot go before the commit. The connection
	// is discarded, never returned to the pool, when the writer closes.
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		discard(conn)
		return nil, fmt.Errorf("set up connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", writerCacheKiB)); err != nil {
		discard(conn)
		return nil, fmt.Errorf("set up connection: %w", err)
	}
	// A flush waits BusyTimeout for another writer, then spools
	// (spool.go); see setBusy.
	w := &writer{conn: conn, multi: map[string]*sql.Stmt{}}
	if err := w.setBusy(ctx, a.o.BusyTimeout); err != nil {
		discard(conn)
		return nil, fmt.Errorf("set up connection: %w", err)
	}
	// Checkpoints are the checkpointer's, while it runs (see there).
	autockpt := "PRAGMA wal_autocheckpoint = 0"
	if !a.isRunning() && !a.o.NoCheckpoints {
		autockpt = "PRAGMA wal_autocheckpoint = 1000"
	}
	if _, err := conn.ExecContext(ctx, autockpt); err != nil {
		discard(conn)
		return nil, fmt.Errorf("set up connection: %w", err)
	}
	a.w = w
	return a.w, nil
}

// discard closes conn for good instead of returning it to the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// dropWriterLocked closes the appender's connection; the next flush opens
// another. The caller holds a.flushing.
func (a *Appender) dropWriterLocked() {
	if a.w != nil {
		a.w.close()
		a.w = nil
	}
}

// writeBatch writes batch in one IMMEDIATE transaction on the appender's
// connection. The wait for the write lock is bounded by BusyTimeout. The
// jobs go in groups, a few statements per group. When a statement fails on
// a constraint, the transaction is rolled back and written again job by
// job, each job under a savepoint: a job whose rows break a rule of the
// schema is rolled back alone and counted as dropped, so one bad job does
// not cost the others their output. Any other error fails the whole batch.
//
// While a flood keeps MaxBatchBytes queued, the transaction takes the next
// batches too (appending them to *batch), for at most maxTxSpan, so that a
// trickle of another job still becomes visible soon.
func (a *Appender) writeBatch(batch *[]jobBatch, more bool) error {
	err := a.writeTx(batch, true, more)
	if err != nil && isConstraint(err) {
		err = a.writeTx(batch, false, more)
	}
	return err
}

// writeTx writes batch, and the batches takeMore adds, in one transaction:
// in groups, or job by job under savepoints. Without more, it writes batch
// alone. It returns an error wrapping errLocked when another connection
// keeps the write lock past BusyTimeout.
func (a *Appender) writeTx(batch *[]jobBatch, grouped, more bool) (err error) {
	// Statements run under a context that is never cancelled: once the
	// transaction holds the lock, abandoning it half way helps no one.
	ctx := context.Background()
	w, err := a.writerLocked(ctx)
	if err != nil {
		return err
	}
	var n int64
	for _, b := range *batch {
		n += b.bytes
	}
	// On a tight disk the WAL is copied and truncated before every
	// transaction: a WAL left to grow to walRestartFrames, beside the
	// database file holding the same pages, filled a small disk twice over
	// (room.go). Otherwise it starts over once it holds walRestartFrames.
	_, tight := a.tight()
	restarted := false
	switch {
	case tight:
		restarted = a.checkpoint(ctx, w.conn) == nil
	case a.walSync >= walRestartFrames*4096 || a.walFrames.Load() >= walRestartFrames:
		restarted = a.restartWAL(ctx, w.conn) == nil
	}
	if restarted {
		a.walFrames.Store(0)
		a.walSync = 0
	}
	if err := a.roomForWAL(ctx, w.conn, n); err != nil {
		// Copying the WAL may give room back (room.go).
		signal(a.ckpt)
		return err
	}
	// The connection's busy timeout says how long BEGIN waits for the
	// lock: BusyTimeout, or spoolBusy while output is spooled, so that the
	// flusher is back to move the children's output to the spool soon; the
	// context only guards against a wait that does not end.
	busy := a.o.BusyTimeout
	if !a.sp.empty() {
		busy = min(busy, spoolBusy)
	}
	if err := w.setBusy(ctx, busy); err != nil {
		a.dropWriterLocked()
		return fmt.Errorf("set busy timeout: %w", err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, 2*a.o.BusyTimeout+time.Second)
	_, err = w.conn.ExecContext(lockCtx, "BEGIN IMMEDIATE")
	interrupted := lockCtx.Err() != nil
	cancel()
	if err != nil {
		if db.IsBusy(err) && !interrupted {
			return fmt.Errorf("begin transaction: %w", errLocked)
		}
		// The connection may be broken, or its BEGIN interrupted half way.
		a.dropWriterLocked()
		if interrupted {
			return fmt.Errorf("begin transaction: %w", errLocked)
		}
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() {
		if err != nil {
			if _, rerr := w.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				a.dropWriterLocked()
			}
		}
	}()
	write := a.writeEach
	if grouped {
		write = a.writeGroup
	}

	txStart := time.Now()
	for i := 0; ; {
		if i == len(*batch) {
			// A transaction that takes the WAL past walRestartFrames
			// ends there, so that the next one starts the WAL over.
			if !more || time.Since(txStart) >= maxTxSpan || a.walSync+n >= walRestartFrames*4096 ||
				a.roomForWAL(ctx, w.conn, n+int64(a.o.MaxBatchBytes)) != nil {
				break
			}
			more := a.takeMore()
			if len(more) == 0 {
				break
			}
			*batch = append(*batch, more...)
			for _, b := range more {
				n += b.bytes
			}
		}
		// A group never spans two takes, so it holds a job at most once.
		for k := i; k < len(*batch); k++ {
			(*batch)[k].gone, (*batch)[k].failed = false, nil
		}
		rest := (*batch)[i:]
		if err = pow2Runs(len(rest), func(lo, hi int) error { return write(ctx, w, rest[lo:hi]) }); err != nil {
			return err
		}
		i = len(*batch)
	}
	if _, err = w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit output: %w", err)
	}
	a.walBytes += n
	a.walSync += n
	a.commits++
	if a.walBytes >= ckptBytes || a.commits >= ckptCommits {
		a.walBytes, a.commits = 0, 0
		signal(a.ckpt)
	}
	if a.isClosed() {
		a.dropWriterLocked() // nobody would close it
	}
	return nil
}

func (a *Appender) isRunning() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running && !a.closed
}

func (a *Appender) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// writeGroup writes the chunks of a group of jobs (a power of two, at most
// groupRows) and advances their rows with one UPDATE and an INSERT per
// power-of-two run of chunks, then evicts where a job retains more than its
// cap.
func (a *Appender) writeGroup(ctx context.Context, w *writer, group []jobBatch) error {
	// Every job's row is found in this write transaction before a row of
	// its chunks is inserted: the writer's connection does not enforce the
	// foreign key (see writerLocked). A row advanced is found; a grown
	// chunk row would be gone with its job (ON DELETE CASCADE); the others
	// are looked up, few in a trickle's flush (a job adds a row every
	// GrowChunk bytes).
	var advance []*jobBatch
	for k := range group {
		if group[k].advance {
			advance = append(advance, &group[k])
		}
	}
	if err := advanceRows(ctx, w, advance); err != nil {
		return err
	}

	var pending, grows []chunkOf
	for k := range group {
		b := &group[k]
		if b.gone {
			continue
		}
		for _, c := range b.chunks {
			c.fellBack = false
			if c.grow {
				grows = append(grows, chunkOf{c, b})
			} else {
				pending = append(pending, chunkOf{c, b})
			}
		}
	}
	// A row to grow that is gone (the job's output was cleared, or the job
	// removed) takes the bytes as a row of its own.
	missed, err := growRows(ctx, w, grows)
	if err != nil {
		return err
	}
	pending = append(pending, missed...)
	var check []*jobBatch
	for _, p := range pending {
		if !p.b.advance && !slices.Contains(check, p.b) {
			check = append(check, p.b)
		}
	}
	if err := checkRows(ctx, w, check); err != nil {
		return err
	}
	pending = slices.DeleteFunc(pending, func(p chunkOf) bool { return p.b.gone })
	var args []any
	if err := pow2Runs(len(pending), func(lo, hi int) error {
		args = args[:0]
		for _, p := range pending[lo:hi] {
			c := p.c
			args = append(args, p.b.st.id, c.seq, string(c.stream), c.off,
				c.firstLine, c.lineCount, db.FormatTime(c.at), c.data)
		}
		_, err := execCount(ctx, w, insertChunksSQL(hi-lo), args)
		return err
	}); err != nil {
		return err
	}
	for k := range group {
		if err := enforceCap(ctx, w.conn, &group[k], -1); err != nil {
			return err
		}
	}
	return nil
}

// enforceCap evicts the middle of b's job's output when it retains more
// than its cap, with the batch written and the jobs row advanced.
// retained is what the row said (-1: not asked); without it, b.unkept
// bounds it from above, and the row is asked only when that bound is over
// the cap, so that a flush of jobs far below their caps reads no row back.
func enforceCap(ctx context.Context, conn *sql.Conn, b *jobBatch, retained int64) error {
	if retained >= 0 {
		b.unkept = b.end - retained
	}
	if b.gone || b.maxOutput == 0 || len(b.chunks) == 0 || b.end-b.unkept <= b.maxOutput {
		return nil
	}
	if retained < 0 {
		if err := conn.QueryRowContext(ctx, unkeptQuery, b.st.id).Scan(&b.unkept); err != nil {
			return fmt.Errorf("read retained output: %w", err)
		}
		retained = b.end - b.unkept
	}
	if retained <= b.maxOutput {
		return nil
	}
	freed, err := evict(ctx, conn, b.st.id, b.head, b.chunks[len(b.chunks)-1].stored().off, retained-b.maxOutput)
	b.unkept += freed
	return err
}

// advanceRows writes the output counters of bs to their jobs rows, with
// an UPDATE per power-of-two run, and marks the batches whose row is gone
// (jobs rm while running).
func advanceRows(ctx context.Context, w *writer, bs []*jobBatch) error {
	args := make([]any, 0, 5*min(len(bs), groupRows))
	advanced, err := countRuns(len(bs), func(lo, hi int) (int64, error) {
		args = args[:0]
		for _, b := range bs[lo:hi] {
			var last any
			if !b.last.IsZero() {
				last = db.FormatTime(b.last)
			}
			args = append(args, b.st.id, b.end, b.lines, last, b.dropped)
		}
		return execCount(ctx, w, updateJobsSQL(hi-lo), args)
	})
	if err != nil {
		return fmt.Errorf("advance jobs: %w", err)
	}
	if advanced == int64(len(bs)) {
		return nil
	}
	return markGone(ctx, w, bs)
}

// checkRows marks the batches of bs whose jobs row is gone, with a count
// per power-of-two run and a lookup per job only when a count falls short.
func checkRows(ctx context.Context, w *writer, bs []*jobBatch) error {
	args := make([]any, 0, min(len(bs), groupRows))
	found, err := countRuns(len(bs), func(lo, hi int) (int64, error) {
		args = args[:0]
		for _, b := range bs[lo:hi] {
			args = append(args, b.st.id)
		}
		st, err := w.prepare(ctx, countJobsSQL(hi-lo))
		if err != nil {
			return 0, err
		}
		var k int64
		err = st.QueryRowContext(ctx, args...).Scan(&k)
		return k, err
	})
	if err != nil {
		return fmt.Errorf("find jobs: %w", err)
	}
	if found == int64(len(bs)) {
		return nil
	}
	return markGone(ctx, w, bs)
}

// markGone marks the batches of bs whose jobs row is gone.
func markGone(ctx context.Context, w *writer, bs []*jobBatch) error {
	for _, b := range bs {
		var one int
		err := w.conn.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, b.st.id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			b.gone = true // nothing to keep
		} else if err != nil {
			return fmt.Errorf("find jobs: %w", err)
		}
	}
	return nil
}

// countJobsSQL counts the jobs rows among n ids.
func countJobsSQL(n int) string {
	return `SELECT count(*) FROM jobs WHERE id IN ` + values(1, n)
}

// chunkOf is a chunk to write and the batch of its job.
type chunkOf struct {
	c *pendingChunk
	b *jobBatch
}

// growRows extends the rows of grows and returns those whose row was not
// there, marked fellBack. All are, unless a job's output was cleared (or
// the job removed) since the row was written: only then are the rows
// looked for one by one.
func growRows(ctx context.Context, w *writer, grows []chunkOf) ([]chunkOf, error) {
	args := make([]any, 0, 5*min(len(grows), groupRows))
	grown, err := countRuns(len(grows), func(lo, hi int) (int64, error) {
		args = args[:0]
		for _, g := range grows[lo:hi] {
			args = append(args, g.b.st.id, g.c.rowOff, g.c.data, g.c.lineCount, db.FormatTime(g.c.at))
		}
		return execCount(ctx, w, growChunksSQL(hi-lo), args)
	})
	if err != nil {
		return nil, fmt.Errorf("grow chunks: %w", err)
	}
	if grown == int64(len(grows)) {
		return nil, nil
	}
	var missed []chunkOf
	for _, g := range grows {
		var one int
		err := w.conn.QueryRowContext(ctx, `SELECT 1 FROM chunks WHERE job_id = ? AND byte_offset = ?`, g.b.st.id, g.c.rowOff).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			g.c.fellBack = true
			missed = append(missed, g)
		case err != nil:
			return nil, fmt.Errorf("grow chunks: %w", err)
		}
	}
	return missed, nil
}

// execCount runs query, prepared on w, and returns how many rows it changed.
func execCount(ctx context.Context, w *writer, query string, args []any) (int64, error) {
	st, err := w.prepare(ctx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// growChunksSQL is growChunk for n rows at once.
func growChunksSQL(n int) string {
	return `UPDATE OR FAIL chunks SET data = CAST(data || v.column3 AS BLOB), line_count = line_count + v.column4,
		at = v.column5
		FROM (VALUES ` + values(n, 5) + `) AS v WHERE chunks.job_id = v.column1 AND chunks.byte_offset = v.column2`
}

// updateJobsSQL is updateJob for n jobs at once, without reading back
// what each retains (see enforceCap): RETURNING costs a result row per
// job, and only a job near its cap needs the figure.
func updateJobsSQL(n int) string {
	return `UPDATE OR FAIL jobs SET output_bytes = v.column2, output_lines = v.column3,
		last_output_at = coalesce(v.column4, last_output_at), dropped_bytes = dropped_bytes + v.column5
		FROM (VALUES ` + values(n, 5) + `) AS v WHERE jobs.id = v.column1`
}

// insertChunksSQL is insertChunk for n rows at once.
func insertChunksSQL(n int) string {
	return `INSERT OR FAIL INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data) VALUES ` + values(n, 8)
}

// writeEach writes group job by job, each under a savepoint, so that a job
// whose rows break a rule of the schema is rolled back alone (b.failed).
func (a *Appender) writeEach(ctx context.Context, w *writer, group []jobBatch) (err error) {
	conn := w.conn
	if w.insert == nil {
		if w.insert, err = conn.PrepareContext(ctx, insertChunk); err != nil {
			return fmt.Errorf("prepare insert: %w", err)
		}
	}
	if w.update == nil {
		if w.update, err = conn.PrepareContext(ctx, updateJob); err != nil {
			return fmt.Errorf("prepare update: %w", err)
		}
	}
	for k := range group {
		b := &group[k]
		if _, err = conn.ExecContext(ctx, "SAVEPOINT job"); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		err = a.writeJob(ctx, conn, w, b)
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
	return nil
}

// writeJob writes one job's chunks, advances its row and evicts the middle
// of its output when it retains more than its cap.
func (a *Appender) writeJob(ctx context.Context, conn *sql.Conn, st *writer, b *jobBatch) error {
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
		c.fellBack = false
		if c.grow {
			res, err := conn.ExecContext(ctx, growChunk, c.data, c.lineCount, db.FormatTime(c.at), b.st.id, c.rowOff)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				continue
			}
			c.fellBack = true // the row is gone: the bytes make a row of their own
		}
		if _, err := st.insert.ExecContext(ctx, b.st.id, c.seq, string(c.stream), c.off,
			c.firstLine, c.lineCount, db.FormatTime(c.at), c.data); err != nil {
			return err
		}
	}
	return enforceCap(ctx, conn, b, retained)
}

// evict deletes the oldest output at or past head, but never the newest
// chunk (at newest), until excess bytes are gone, and counts them: whole
// chunks, and the front of the next one when a whole one would be too
// much, so that exactly excess bytes go (the cap keeps exactly HeadKeep
// and the newest rest). It returns how many bytes went.
func evict(ctx context.Context, conn *sql.Conn, jobID string, head, newest, excess int64) (int64, error) {
	rows, err := conn.QueryContext(ctx, evictable, jobID, head)
	if err != nil {
		return 0, err
	}
	var freed, lastOff, cutOff, cut int64
	n := 0
	for rows.Next() && freed < excess {
		var off, size int64
		if err := rows.Scan(&off, &size); err != nil {
			rows.Close()
			return 0, err
		}
		if off >= newest {
			break
		}
		if freed+size > excess {
			cutOff, cut = off, excess-freed
			break
		}
		freed += size
		lastOff = off
		n++
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n > 0 {
		if _, err := conn.ExecContext(ctx, deleteChunks, jobID, head, lastOff); err != nil {
			return 0, err
		}
	}
	if cut > 0 {
		if err := trimChunk(ctx, conn, jobID, cutOff, cut); err != nil {
			return 0, err
		}
		freed += cut
	}
	if freed == 0 {
		return 0, nil
	}
	if _, err = conn.ExecContext(ctx, addEvicted, freed, jobID); err != nil {
		return 0, err
	}
	return freed, nil
}

// trimChunk deletes the first k bytes of the chunk at off (fewer than it
// holds): the rest keeps its absolute offset and line numbers.
func trimChunk(ctx context.Context, conn *sql.Conn, jobID string, off, k int64) error {
	var data []byte
	if err := conn.QueryRowContext(ctx, `SELECT data FROM chunks WHERE job_id = ? AND byte_offset = ?`, jobID, off).Scan(&data); err != nil {
		return fmt.Errorf("trim chunk: %w", err)
	}
	nl := int64(bytes.Count(data[:k], newline))
	_, err := conn.ExecContext(ctx, `UPDATE chunks SET data = ?, byte_offset = byte_offset + ?, first_line = first_line + ?,
		line_count = line_count - ? WHERE job_id = ? AND byte_offset = ?`, data[k:], k, nl, nl, jobID, off)
	if err != nil {
		return fmt.Errorf("trim chunk: %w", err)
	}
	return nil
}

// isConstraint reports whether err is SQLite's SQLITE_CONSTRAINT family:
// the statement broke a rule of the schema, which is the job's problem, not
// the database's.
func isConstraint(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 19
}

// Checkpoints: copying the WAL into the database file.
//
// SQLite checkpoints on the commit that takes the WAL past 1000 pages,
// in the committing connection: under a flood, the flusher stopped every
// 4 MiB to copy them (read back from the WAL, written to the database,
// synced), a tenth of its time. Here the appender's connection does not
// checkpoint by itself; after every ckptBytes or ckptCommits committed,
// the checkpointer goroutine copies the WAL on its own connection, on
// another core, while the flusher writes on. A checkpoint that runs beside
// a writer cannot let the WAL start over (that needs every frame copied
// when a write transaction begins), so once a checkpoint finds
// walRestartFrames in the WAL, or as many pages of output were committed,
// the flusher checkpoints itself before its next transaction, copying only
// what the checkpointer has not: the WAL then starts over, and stays under
// about walRestartFrames plus a checkpointer's round.
// BenchmarkAppend256MiB, x_raw_sqlite: 0.83 checkpointing inline, 1.07-1.13
// with the checkpointer; the capture of 1 GiB end to end (bench/run.sh):
// 0.64-0.73 of raw SQLite before, 0.84-0.93 after.
//
// Frames, not bytes of output, measure the WAL: a trickle of many jobs
// writes far more pages than output bytes (each flush rewrites the pages
// of every job row it advances).
const (
	ckptBytes        = 4 << 20
	ckptCommits      = 32
	walRestartFrames = 8192 // 32 MiB of 4 KiB pages
)

// errNoCheckpoints is what checkpoint returns when they are left to
// another process (AppenderOptions.NoCheckpoints).
var errNoCheckpoints = errors.New("checkpoints are left to another process")

// checkpointer copies the WAL into the database file when woken.
func (a *Appender) checkpointer() {
	defer a.wg.Done()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.ckpt:
		}
		conn, err := a.d.Conn(a.ctx)
		if err != nil {
			continue // the flusher's own checkpoints still bound the WAL
		}
		_ = a.checkpoint(a.ctx, conn) // a failed one is made up for by the flusher's
		conn.Close()
	}
}

// checkpoint runs a passive checkpoint (one that waits for no reader or
// writer) on conn, one at a time, and notes how many frames the WAL holds.
// On a tight disk it truncates the WAL instead, or copies nothing and
// says the disk is full while the copy would not fit (see room.go).
// The caller that is the flusher holds a.flushing, so nothing is committed
// meanwhile and the checkpoint copies every frame that no reader still
// needs.
func (a *Appender) checkpoint(ctx context.Context, conn *sql.Conn) error {
	if a.o.NoCheckpoints {
		return errNoCheckpoints
	}
	a.ckptMu.Lock()
	defer a.ckptMu.Unlock()
	mode, err := a.checkpointMode(ctx, conn)
	if err != nil {
		return err // see room.go
	}
	var busy, frames, copied int64
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &copied)
	if err != nil {
		return err
	}
	a.walFrames.Store(frames)
	return nil
}

// errPinned says a checkpoint left frames that a reader's snapshot still
// needs, so the WAL could not start over; the flusher tries again before
// its next transaction.
var errPinned = errors.New("checkpoint: frames still in use by a reader")

// restartWait bounds how long restartWAL waits for readers of old frames;
// after restarts that readers kept from starting the WAL over, it waits
// twice as long each time, up to restartWaitMax. On a loaded machine many
// short reads of log -f followers overlap, and a WAL whose restart missed
// grows by another transaction of output each time (48.9 MiB seen, beyond
// the 48 MiB the load rows accept).
const (
	restartWait    = 100 * time.Millisecond
	restartWaitMax = 800 * time.Millisecond
)

// restartWAL copies the whole WAL into the database file and starts it
// over (a RESTART checkpoint), waiting up to restartWait for readers that
// still read old frames: readers hold a snapshot for one read, so a moment
// is enough. A passive checkpoint here, leaving the restart to the next
// write, missed it whenever a read overlapped, and the WAL grew by another
// walRestartFrames each time (121 MiB seen with four log -f followers on a
// loaded machine). Against a reader that keeps a snapshot for long (an
// open transaction in the sqlite3 shell) it gives up after restartWait,
// and the next transaction tries again.
func (a *Appender) restartWAL(ctx context.Context, conn *sql.Conn) (err error) {
	if a.o.NoCheckpoints {
		return errNoCheckpoints
	}
	if _, err := a.checkpointMode(ctx, conn); err != nil {
		return err // see room.go
	}
	a.ckptMu.Lock()
	defer a.ckptMu.Unlock()
	var busyMS int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busyMS); err != nil {
		return err
	}
	wait := min(restartWait<<min(a.restartMisses, 3), restartWaitMax)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err != nil {
		return err
	}
	defer func() {
		if _, rerr := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyMS)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	var busy, frames, copied int64
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	if busy != 0 {
		a.restartMisses++
		a.walFrames.Store(frames)
		return errPinned
	}
	a.restartMisses = 0
	return nil
}
