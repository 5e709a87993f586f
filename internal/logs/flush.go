package logs

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

const (
	insertChunk = `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

	// evictable lists the chunks past the head, oldest first.
	evictable = `SELECT byte_offset, ` + db.ChunkSize + ` FROM chunks
		WHERE job_id = ? AND byte_offset >= ? ORDER BY byte_offset`

	deleteChunks = `DELETE FROM chunks WHERE job_id = ? AND byte_offset >= ? AND byte_offset <= ?`

	// growChunk extends a job's newest row (see GrowChunk).
	growChunk = `UPDATE chunks SET data = CAST(data || ? AS BLOB), line_count = line_count + ?, at = ?
		WHERE job_id = ? AND byte_offset = ? AND size IS NULL`
)

// writerCacheKiB is the page cache of the appender's connection: a flood's
// transaction (at most MaxPendingBytes, 8 MiB, by default) fits in it
// whole. With SQLite's default 2 MiB, a transaction spilled its pages to
// the WAL half way and wrote some of them twice. Smaller transactions with
// this cache write as fast as the larger ones did, for less pending output
// and so about the same memory.
const writerCacheKiB = 10 << 10

// maxBindBytes bounds the chunk bytes one INSERT binds. The driver copies
// each bound blob into memory of its C allocator and frees it after the
// statement; that allocator keeps only 4 MiB of each size class ready for
// reuse and hands the rest back to the system. A statement of 64 chunks
// of 64 KiB (4 MiB, each in a 128 KiB class) went past it every time, so
// every insert gave pages back and faulted them in again: in a profile of
// a 256 MiB capture, binding (the copy, the faults and madvise) took a
// third of the supervisor's CPU. Runs of at most 1 MiB stay inside it;
// the statements saved by longer runs matter only for small chunks.
const maxBindBytes = 1 << 20

// maxTxSpan bounds how long a transaction goes on taking batches under a
// flood (four flush intervals of the grid it was first tuned with).
const maxTxSpan = 200 * time.Millisecond

// writer is the appender's own connection, kept from one flush to the
// next: its statements stay prepared in the connection's statement cache
// (db.Open), and preparing a 64-row statement costs more than running it.
// It is used only by the holder of a.flushing.
type writer struct {
	conn *sql.Conn
	busy time.Duration // the connection's busy timeout

	// The connection to the output data file (db.OutputPath), opened by
	// the first chunk stored there, and its transaction, begun by the
	// first chunk of a transaction stored there and committed just before
	// the transaction on conn, or before once it holds outTxBytes (see
	// putData).
	out      *sql.Conn
	outTx    bool
	nextID   int64 // the id of the next chunk_data row
	outBytes int64 // bytes stored there in outTx
	// external counts the bytes of output that the transaction on conn
	// stored in the output data file: they take no room in its WAL.
	external int64

	// freeing are the chunk_data rows of chunks that the transaction on
	// conn deletes (evicted); once it commits, they are deleted there
	// too (freeData).
	freeing []int64
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

func (w *writer) close() {
	discard(w.conn) // its foreign keys are off
	if w.out != nil {
		discard(w.out)
	}
}

// externalMin is the smallest chunk whose bytes go to the output data file
// (db.OutputPath) when they are stored as they are (they do not
// compress): a flood's chunk of random or compressed output. Smaller rows
// and compressed frames stay in the database's own pages.
const externalMin = 32 << 10

// putData stores data, a chunk of job jobID, in the output data file, in
// the writer's transaction there (begun here if need be), and returns its
// id for the chunk's data_ref. ok is false when the disk has no room for
// it there (db.Upkeep.RoomForWAL): the chunk is then stored in the
// database's own pages, where the transaction's room check counted it.
func (a *Appender) putData(ctx context.Context, w *writer, jobID string, data []byte) (id int64, ok bool, err error) {
	if a.outOff.Load() || a.up.Off() {
		// Litestream, which checkpoints for us, replicates one
		// database: jobs.db holds every byte.
		return 0, false, nil
	}
	if !w.outTx {
		if err := a.beginOutput(ctx, w); err != nil {
			if errors.Is(err, vocab.ErrDiskFull) {
				return 0, false, nil
			}
			return 0, false, &outputFileError{err}
		}
	}
	if a.outUp.Load().RoomForWAL(ctx, w.out, w.outBytes+int64(len(data))) != nil {
		return 0, false, nil
	}
	id = w.nextID
	if _, err := w.out.ExecContext(ctx, `INSERT INTO chunk_data (id, job_id, data) VALUES (?, ?, ?)`, id, jobID, data); err != nil {
		return 0, false, &outputFileError{err}
	}
	w.nextID++
	w.outBytes += int64(len(data))
	w.external += int64(len(data))
	if w.outBytes >= outTxBytes {
		// Committed early, the bytes are still committed before the
		// chunk rows naming them; the next chunk begins a transaction.
		if err := a.endOutput(ctx, w, true); err != nil {
			return 0, false, err
		}
	}
	return id, true, nil
}

// outTxBytes ends the writer's transaction on the output data file once
// it holds this many bytes: its pages stay within the connection's cache
// (writerCacheKiB). A transaction whose pages spill to the WAL before the
// commit writes some of them there twice.
const outTxBytes = 6 << 20

// outCacheLimit is the most memory the page cache of the writer's
// connection to the output data file may hold before its next
// transaction: past it a new connection replaces it, which frees the
// cache. SQLite bounds a page cache in pages, not bytes, and a full cache
// takes the oldest page of any other cache of the process (this build of
// SQLite shares one pool among them): the file's 64 KiB pages took the
// places of the database's 4 KiB ones, each time one of those was read
// again, and this cache outgrew writerCacheKiB by about 35 pages every
// 64 MiB of a flood (a 1 GiB capture's supervisor peaked at 94 MiB).
// Freeing a cache and filling a new one costs a flood tens of
// milliseconds (the pages go back to the system and come again), so the
// bound leaves room for a few hundred MiB of that growth between two: a
// supervisor capturing 1 GiB of random output then peaked at 59 MiB, at
// about 4% of its speed.
const outCacheLimit = 16 << 20

// outputFileError is a failed write to the output data file. The file only
// spares the database's pages a flood's bytes, so a file that cannot be
// written (a damaged page, a file system that refuses it) must not cost
// output: the transaction is written again with every chunk in the
// database, and so are the later ones (Appender.outOff).
type outputFileError struct{ err error }

func (e *outputFileError) Error() string { return "store output data: " + e.err.Error() }
func (e *outputFileError) Unwrap() error { return e.err }

// beginOutput opens the writer's connection to the output data file if
// need be and begins its transaction there. The caller holds a.flushing.
func (a *Appender) beginOutput(ctx context.Context, w *writer) error {
	if w.out != nil {
		if n, err := db.CacheBytes(w.out); err == nil && n > a.o.outCacheLimit {
			// The new connection opens before the old one closes: the
			// last connection to close a WAL database checkpoints it.
			if conn, err := a.openOutput(ctx); err == nil {
				discard(w.out)
				w.out = conn
			}
		}
	}
	if w.out == nil {
		conn, err := a.openOutput(ctx)
		if err != nil {
			return err
		}
		w.out = conn
	}
	if err := a.outUp.Load().BeforeTx(ctx, w.out, 0); err != nil {
		return err
	}
	if _, err := w.out.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := w.out.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) + 1 FROM chunk_data`).Scan(&w.nextID); err != nil {
		_, _ = w.out.ExecContext(ctx, "ROLLBACK")
		return err
	}
	w.outTx, w.outBytes = true, 0
	return nil
}

// openOutput opens a connection to the output data file for the writer.
func (a *Appender) openOutput(ctx context.Context) (*sql.Conn, error) {
	o, err := a.d.Output(ctx, true)
	if err != nil {
		return nil, err
	}
	conn, err := o.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range []string{
		fmt.Sprintf("PRAGMA cache_size = -%d", writerCacheKiB),
		fmt.Sprintf("PRAGMA busy_timeout = %d", a.o.BusyTimeout.Milliseconds()),
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			discard(conn)
			return nil, err
		}
	}
	ou := a.outUp.Load()
	if ou == nil {
		ou = a.up.NewOutputUpkeep(o)
		if a.isRunning() {
			ou.Start()
		}
		a.outUp.Store(ou)
	}
	if err := ou.SetUpWriter(ctx, conn, a.isRunning()); err != nil {
		discard(conn)
		return nil, err
	}
	return conn, nil
}

// noteFreed notes the chunk_data rows of the chunks of jobID from head to
// last, which the transaction deletes.
func (w *writer) noteFreed(ctx context.Context, jobID string, head, last int64) error {
	rows, err := w.conn.QueryContext(ctx, `SELECT data_ref FROM chunks
		WHERE job_id = ? AND byte_offset >= ? AND byte_offset <= ? AND data_ref IS NOT NULL`, jobID, head, last)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ref int64
		if err := rows.Scan(&ref); err != nil {
			return err
		}
		w.freeing = append(w.freeing, ref)
	}
	return rows.Err()
}

// freeData deletes from the output data file the bytes of the chunks the
// transaction just committed deleted, in a transaction of its own that
// comes after it, once that commit is on the disk (db.FreeOutputData): a
// chunk row never names bytes that are gone, though a reader that read the
// row before may find them gone (db.ErrOutputDataGone, and it reads again
// holding the file: again). What a failure or a crash leaves there,
// db.SweepOutputData deletes.
func (a *Appender) freeData(ctx context.Context, w *writer) {
	ids := w.freeing
	w.freeing = w.freeing[:0]
	if w.out == nil {
		return
	}
	_ = a.d.FreeOutputData(ctx, w.out, ids)
}

// writtenData reads the bytes stored under ref in the output data file on
// the writer's connection there, which sees what its open transaction
// stored.
func (a *Appender) writtenData(ctx context.Context, w *writer, ref int64) ([]byte, error) {
	if w.out == nil {
		// Stored by an earlier appender: open the connection.
		if !w.outTx {
			if err := a.beginOutput(ctx, w); err != nil {
				return nil, err
			}
		}
	}
	var data []byte
	err := w.out.QueryRowContext(ctx, `SELECT data FROM chunk_data WHERE id = ?`, ref).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w (row %d)", db.ErrOutputDataGone, ref)
	}
	return data, err
}

// endOutput commits (or rolls back) the writer's transaction on the
// output data file, if one is open.
func (a *Appender) endOutput(ctx context.Context, w *writer, commit bool) error {
	if w.out == nil || !w.outTx {
		return nil
	}
	w.outTx = false
	if !commit {
		_, err := w.out.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := w.out.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = w.out.ExecContext(ctx, "ROLLBACK")
		return &outputFileError{fmt.Errorf("commit: %w", err)}
	}
	a.outUp.Load().Committed(w.outBytes)
	return nil
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
	w := &writer{conn: conn}
	if err := w.setBusy(ctx, a.o.BusyTimeout); err != nil {
		discard(conn)
		return nil, fmt.Errorf("set up connection: %w", err)
	}
	// Checkpoints are the checkpointer's, while it runs.
	if err := a.up.SetUpWriter(ctx, conn, a.isRunning()); err != nil {
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
	var ofe *outputFileError
	if errors.As(err, &ofe) && a.outOff.CompareAndSwap(false, true) {
		if a.o.OnOutputFileError != nil {
			a.o.OnOutputFileError(ofe)
		}
		err = a.writeTx(batch, true, more)
	}
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
	// The wait for the lock is BusyTimeout, or spoolBusy while output is
	// spooled, so that the flusher is back to move the children's output
	// to the spool soon: first for this process's other writers (their
	// queue, db.LockWrites), then, as the connection's busy timeout, for
	// another process's. The context of BEGIN only guards against a wait
	// that does not end.
	busy := a.o.BusyTimeout
	if !a.sp.empty() {
		busy = min(busy, spoolBusy)
	}
	queueCtx, cancelQueue := context.WithTimeout(ctx, busy)
	unlock, err := a.d.LockWrites(queueCtx)
	cancelQueue()
	if err != nil {
		return fmt.Errorf("begin transaction: %w", errLocked)
	}
	defer unlock()
	// The WAL is copied or started over when due, and the batch must
	// leave room on the disk (db.Upkeep).
	if err := a.up.BeforeTx(ctx, w.conn, n); err != nil {
		return err
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
			w.freeing = w.freeing[:0] // the chunks stay
			rerr := a.endOutput(ctx, w, false)
			if _, err := w.conn.ExecContext(ctx, "ROLLBACK"); err != nil || rerr != nil {
				a.dropWriterLocked()
			}
		}
	}()
	write := a.writeEach
	if grouped {
		write = a.writeGroup
	}

	txStart := time.Now()
	w.external = 0
	for i := 0; ; {
		if i == len(*batch) {
			// A transaction that takes the WAL far enough ends there,
			// so that the next one starts the WAL over (db.Upkeep).
			if !more || time.Since(txStart) >= maxTxSpan || a.up.TxFull(ctx, w.conn, n-w.external, int64(a.o.MaxBatchBytes)) {
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
		if err = db.Runs(len(rest), func(lo, hi int) error { return write(ctx, w, rest[lo:hi]) }); err != nil {
			return err
		}
		i = len(*batch)
	}
	// The bytes stored in the output data file commit first: a chunk row
	// never names bytes that were not committed (db.OutputPath).
	if err = a.endOutput(ctx, w, true); err != nil {
		return err
	}
	if _, err = w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit output: %w", err)
	}
	a.freeData(ctx, w)
	// The WAL holds what the database's pages took: a flood whose bytes
	// went to the output data file wakes no checkpoint for them.
	a.up.Committed(n - w.external)
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
// db.MaxRunRows) and advances their rows with one UPDATE and an INSERT per
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
	rawSize := func(i int) int { return len(pending[i].c.data) }
	if err := db.RunsWithin(len(pending), rawSize, maxBindBytes, func(lo, hi int) error {
		args = args[:0]
		for _, p := range pending[lo:hi] {
			c := p.c
			var data, size, ref any = c.data, nil, nil
			if out, ok := c.encoded(c.data); ok {
				data, size = out, int64(len(c.data))
			} else if len(c.data) >= externalMin {
				id, ok, err := a.putData(ctx, w, p.b.st.id, c.data)
				if err != nil {
					return err
				}
				if ok {
					data, size, ref = []byte{}, int64(len(c.data)), id
				}
			}
			args = append(args, p.b.st.id, c.seq, string(c.stream), c.off,
				c.firstLine, c.lineCount, db.FormatTime(c.at), data, size, ref)
		}
		_, err := w.conn.ExecContext(ctx, insertChunksSQL(hi-lo), args...)
		return err
	}); err != nil {
		return err
	}
	for k := range group {
		if err := a.enforceCap(ctx, w, &group[k], -1); err != nil {
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
func (a *Appender) enforceCap(ctx context.Context, w *writer, b *jobBatch, retained int64) error {
	conn := w.conn
	if retained >= 0 {
		b.unkept = b.end - retained
	}
	if b.gone || b.maxOutput == 0 || len(b.chunks) == 0 || b.end-b.unkept <= b.maxOutput {
		return nil
	}
	if retained < 0 {
		unkept, err := db.ReadUnkept(ctx, conn, b.st.id)
		if err != nil {
			return err
		}
		b.unkept = unkept
		retained = b.end - b.unkept
	}
	if retained <= b.maxOutput {
		return nil
	}
	freed, err := a.evict(ctx, w, b.st.id, b.head, b.chunks[len(b.chunks)-1].stored().off, retained-b.maxOutput)
	b.unkept += freed
	return err
}

// advanceRows writes the output counters of bs to their jobs rows, with
// an UPDATE per power-of-two run, and marks the batches whose row is gone
// (jobs rm while running).
func advanceRows(ctx context.Context, w *writer, bs []*jobBatch) error {
	if len(bs) == 0 {
		return nil
	}
	as := make([]db.OutputAdvance, len(bs))
	for i, b := range bs {
		as[i] = db.OutputAdvance{JobID: b.st.id, Bytes: b.end, Lines: b.lines, LastAt: b.last, Dropped: b.dropped}
	}
	advanced, err := db.AdvanceOutputs(ctx, w.conn, as)
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
	if len(bs) == 0 {
		return nil
	}
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.st.id
	}
	found, err := db.CountJobRows(ctx, w.conn, ids)
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
		ok, err := db.JobRowExists(ctx, w.conn, b.st.id)
		if err != nil {
			return fmt.Errorf("find jobs: %w", err)
		}
		if !ok {
			b.gone = true // nothing to keep
		}
	}
	return nil
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
	args := make([]any, 0, 5*min(len(grows), db.MaxRunRows))
	var grown int64
	err := db.Runs(len(grows), func(lo, hi int) error {
		args = args[:0]
		for _, g := range grows[lo:hi] {
			args = append(args, g.b.st.id, g.c.rowOff, g.c.data, g.c.lineCount, db.FormatTime(g.c.at))
		}
		res, err := w.conn.ExecContext(ctx, growChunksSQL(hi-lo), args...)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		grown += k
		return err
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
		err := w.conn.QueryRowContext(ctx, `SELECT 1 FROM chunks WHERE job_id = ? AND byte_offset = ? AND size IS NULL`, g.b.st.id, g.c.rowOff).Scan(&one)
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

// growChunksSQL is growChunk for n rows at once.
func growChunksSQL(n int) string {
	return `UPDATE OR FAIL chunks SET data = CAST(data || v.column3 AS BLOB), line_count = line_count + v.column4,
		at = v.column5
		FROM (VALUES ` + db.ValuesSQL(n, 5) + `) AS v
		WHERE chunks.job_id = v.column1 AND chunks.byte_offset = v.column2 AND chunks.size IS NULL`
}

// insertChunksSQL is insertChunk for n rows at once.
func insertChunksSQL(n int) string {
	return `INSERT OR FAIL INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data, size, data_ref) VALUES ` + db.ValuesSQL(n, 10)
}

// writeEach writes group job by job, each under a savepoint, so that a job
// whose rows break a rule of the schema is rolled back alone (b.failed).
func (a *Appender) writeEach(ctx context.Context, w *writer, group []jobBatch) (err error) {
	conn := w.conn
	for k := range group {
		b := &group[k]
		if _, err = conn.ExecContext(ctx, "SAVEPOINT job"); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		freeing := len(w.freeing)
		err = a.writeJob(ctx, w, b)
		if err != nil && isConstraint(err) {
			if _, rerr := conn.ExecContext(ctx, "ROLLBACK TO job"); rerr != nil {
				return fmt.Errorf("write output: %w", rerr)
			}
			w.freeing = w.freeing[:freeing] // its chunks stay
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
func (a *Appender) writeJob(ctx context.Context, w *writer, b *jobBatch) error {
	conn := w.conn
	adv := db.OutputAdvance{JobID: b.st.id, Bytes: b.end, Lines: b.lines, Dropped: b.dropped}
	if len(b.chunks) > 0 {
		adv.LastAt = b.last
	}
	retained, ok, err := db.AdvanceOutput(ctx, conn, adv)
	if err != nil {
		return err
	}
	if !ok {
		b.gone = true // deleted (jobs rm) while running: nothing to keep
		return nil
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
		if _, err := conn.ExecContext(ctx, insertChunk, b.st.id, c.seq, string(c.stream), c.off,
			c.firstLine, c.lineCount, db.FormatTime(c.at), c.data); err != nil {
			return err
		}
	}
	return a.enforceCap(ctx, w, b, retained)
}

// evict deletes the oldest output at or past head, but never the newest
// chunk (at newest), until excess bytes are gone, and counts them: whole
// chunks, and the front of the next one when a whole one would be too
// much, so that exactly excess bytes go (the cap keeps exactly HeadKeep
// and the newest rest). It returns how many bytes went.
func (a *Appender) evict(ctx context.Context, w *writer, jobID string, head, newest, excess int64) (int64, error) {
	conn := w.conn
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
		if err := w.noteFreed(ctx, jobID, head, lastOff); err != nil {
			return 0, err
		}
		if _, err := conn.ExecContext(ctx, deleteChunks, jobID, head, lastOff); err != nil {
			return 0, err
		}
	}
	if cut > 0 {
		if err := a.trimChunk(ctx, w, jobID, cutOff, cut); err != nil {
			return 0, err
		}
		freed += cut
	}
	if freed == 0 {
		return 0, nil
	}
	if err := db.AddEvicted(ctx, conn, jobID, freed); err != nil {
		return 0, err
	}
	return freed, nil
}

// trimChunk deletes the first k bytes of the chunk at off (fewer than it
// holds): the rest keeps its absolute offset and line numbers.
func (a *Appender) trimChunk(ctx context.Context, w *writer, jobID string, off, k int64) error {
	conn := w.conn
	var stored []byte
	var size, ref sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT data, size, data_ref FROM chunks WHERE job_id = ? AND byte_offset = ?`, jobID, off).Scan(&stored, &size, &ref); err != nil {
		return fmt.Errorf("trim chunk: %w", err)
	}
	data := stored
	if ref.Valid {
		// The bytes are in the output data file; the rest is kept here.
		w.freeing = append(w.freeing, ref.Int64)
		var err error
		if data, err = a.writtenData(ctx, w, ref.Int64); err != nil {
			return fmt.Errorf("trim chunk: %w", err)
		}
	} else if size.Valid {
		var err error
		if data, err = decodeChunk(nil, stored, size.Int64); err != nil {
			return fmt.Errorf("trim chunk: %w", err)
		}
	}
	// The rest is stored as is: a trim happens once a flush at most.
	nl := int64(bytes.Count(data[:k], newline))
	_, err := conn.ExecContext(ctx, `UPDATE chunks SET data = ?, size = NULL, data_ref = NULL, byte_offset = byte_offset + ?, first_line = first_line + ?,
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
