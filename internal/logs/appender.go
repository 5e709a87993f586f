package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// AppenderOptions tunes an [Appender]. Zero fields take the defaults.
type AppenderOptions struct {
	// FlushInterval is the spacing of the grid the flusher flushes on, and
	// so the longest a written byte waits before a flush
	// (DefaultFlushInterval).
	FlushInterval time.Duration
	// MaxBatchBytes starts a flush at once when this many bytes wait
	// (DefaultMaxBatchBytes).
	MaxBatchBytes int
	// MaxChunk is the largest chunk row (DefaultMaxChunk).
	MaxChunk int
	// HeadKeep is how much of the start of a capped job's output is never
	// evicted (DefaultHeadKeep); a cap smaller than twice HeadKeep keeps
	// half the cap as head.
	HeadKeep int64
	// MaxPendingBytes bounds the bytes written but not yet in the database;
	// Write blocks above it (2 × MaxBatchBytes). It also bounds a transaction
	// under a flood, which the writer's page cache holds whole (see
	// writerCacheKiB).
	MaxPendingBytes int
	// BusyTimeout bounds one flush's wait for the database's write lock
	// (DefaultBusyTimeout); past it, the batch goes to the spool (see
	// spool.go).
	BusyTimeout time.Duration
	// MaxSpoolBytes bounds the output spooled to disk while the database
	// is locked (DefaultMaxSpoolBytes); above it, Write blocks.
	MaxSpoolBytes int64
	// RetryFor is how long a failing flush is retried before its bytes are
	// dropped (DefaultRetryFor). After a drop, flushes are tried once until
	// one succeeds, so a dead database does not slow the children.
	RetryFor time.Duration
	// OnDropped, if set, is called (from the flusher, without locks held)
	// with the bytes of a job that could not be stored and why.
	OnDropped func(jobID string, n int64, err error)
	// MinFree is the free space the flusher leaves on the database's file
	// system (DefaultMinFree): output that would take more is dropped, as
	// on a full disk, so that the small writes that record what happens to
	// jobs (a status change, an event) still fit.
	MinFree int64
	// RowEvery is how often a flush advances a trickling job's counters in
	// its jobs row (DefaultRowEvery).
	RowEvery time.Duration
	// NoCheckpoints leaves checkpoints to another process: the appender
	// never copies the WAL into the database file. Litestream, which
	// replicates the database from its WAL, asks applications to leave
	// checkpoints to it; without such a process the WAL only grows. It
	// also keeps every chunk in the database: Litestream replicates one
	// database, and the output data file would be a second.
	NoCheckpoints bool
	// OnOutputFileError, if set, is called once when the output data file
	// (db.OutputPath) cannot be written (damaged, or refused by the file
	// system): the appender then stores every chunk in the database.
	OnOutputFileError func(err error)

	// outCacheLimit bounds the page cache of the connection to the
	// output data file (outCacheLimit, the constant; tests set less).
	outCacheLimit int64
}

func (o *AppenderOptions) setDefaults() {
	if o.RowEvery <= 0 {
		o.RowEvery = DefaultRowEvery
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MaxChunk <= 0 {
		o.MaxChunk = DefaultMaxChunk
	}
	if o.HeadKeep <= 0 {
		o.HeadKeep = DefaultHeadKeep
	}
	if o.MaxPendingBytes <= 0 {
		o.MaxPendingBytes = 2 * o.MaxBatchBytes
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.MaxSpoolBytes <= 0 {
		o.MaxSpoolBytes = DefaultMaxSpoolBytes
	}
	if o.MinFree <= 0 {
		o.MinFree = DefaultMinFree
	}
	if o.outCacheLimit <= 0 {
		o.outCacheLimit = outCacheLimit
	}
}

// Appender batches the output of many jobs into few transactions. One
// supervisor owns one Appender: NewAppender, Open, then Track each job before
// its first Write, and Close at the end. Its methods are safe for concurrent
// use.
type Appender struct {
	d *db.DB
	o AppenderOptions

	mu       sync.Mutex
	cond     *sync.Cond // broadcast when pending shrinks or the appender closes
	jobs     map[string]*jobState
	queued   int  // bytes in jobs' queues
	pending  int  // queued plus bytes in the batch being written
	running  bool // the flusher runs, so pending will shrink
	closed   bool
	degraded bool // the last flush dropped its bytes: try once, do not retry

	flushing chan struct{} // holds one token while a flush runs
	w        *writer       // the flushes' connection; guarded by flushing
	sp       spool         // output waiting for a locked database; guarded by flushing
	packers  chan struct{} // a slot per goroutine compressing a chunk (Write)
	bufs     sync.Pool     // *[]byte of capacity MaxChunk, from written chunks (recycle)
	bufsMade atomic.Int64  // MaxChunk buffers chunkBuf had to make (tests)
	wake     chan struct{} // the first byte after an idle period
	full     chan struct{} // MaxBatchBytes are queued

	up    *db.Upkeep                // the WAL's checkpoints and the room on the disk
	outUp atomic.Pointer[db.Upkeep] // the same for the output data file, once the writer opened it
	// outOff is set once the output data file failed a write: chunks are
	// stored in the database from then on (see outputFileError).
	outOff atomic.Bool

	stopWait atomic.Bool // Untrack no longer waits for spooled output

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// jobState is the appender's view of one job. off, lines and seq run ahead
// of the database by the queued chunks.
type jobState struct {
	id        string
	maxOutput int64
	head      int64 // chunks are cut at this offset; 0 = no cap
	off       int64 // absolute offset of the next byte
	lines     int64 // newlines before off
	seq       int64 // seq of the next chunk
	queue     []*pendingChunk
	lastWrite time.Time
	dropped   int64 // dropped bytes not yet added to jobs.dropped_bytes
	// unkept is at most evicted_bytes + dropped_bytes of the jobs row: the
	// bytes of off that are not retained. It is read at Track and grows
	// with what the appender records itself; `jobs clear` may add more
	// behind its back, so off - unkept may overstate what the job retains
	// (never understate it), and a flush asks the row when it says the
	// job is over its cap.
	unkept int64
	rowAt  time.Time // when the jobs row's counters were last advanced
	rowOff int64     // output_bytes as the jobs row has it
	gone   bool      // the jobs row was deleted: discard its output
	tail   *tailRow
	packs  atomic.Int32 // how the job's last full chunk was stored (packChunk)
}

// tailRow is the newest chunk row of a job as the appender last wrote
// it, which a trickle's next bytes may grow (see GrowChunk).
type tailRow struct {
	seq    int64
	stream Stream
	off    int64 // byte_offset of the row
	size   int   // bytes in the row
	limit  int   // the most the row may hold
}

// GrowChunk is the size up to which the newest chunk row of a job grows in
// place (its data extended by an UPDATE) instead of a new row following it.
//
// A job that prints a few lines between two flushes would otherwise add a
// small row each flush, and each row two index entries keyed by job: with
// many such jobs, every flush touched a leaf page of each index per job
// (three WAL writes a job a flush). Growing the row changes no index
// entry, and the rows being grown sit together at the end of the table
// (BenchmarkTrickle100Jobs measures it; 1 KiB did best of the sizes
// tried). Readers see no difference: a chunk's offset and first line do
// not change, and its data only grows at the end.
const GrowChunk = 1024

// DefaultRowEvery is how often a flush advances a trickling job's counters
// in its jobs row (output_bytes, output_lines, last_output_at). The newest
// chunk row always has them: readers take the end of a running job's
// output from there (the db package's job reads, the readers here, Track),
// so the row may lag this much while the job runs. An UPDATE of 100 jobs
// rows on every flush was a third of what a flush of 100 trickling jobs
// cost. Rows are advanced at once when output was dropped, by Flush and
// Close, and the terminal status records the final counts.
const DefaultRowEvery = time.Second

type pendingChunk struct {
	seq       int64
	stream    Stream
	off       int64
	firstLine int64
	lineCount int64
	limit     int
	at        time.Time
	data      []byte
	// grow is set when data extends the stored row at rowOff, which held
	// rowSize bytes, rather than starting a row of its own; fellBack is set
	// by the writer when that row was gone (cleared) and data became a row
	// of its own after all.
	grow     bool
	rowOff   int64
	rowSize  int
	fellBack bool
	// spoolAt and size locate data in the spool file while the chunk is
	// spooled (data is nil then).
	spoolAt int64
	size    int
	// pack is data's stored form, made once, by the Write that filled the
	// chunk or else by the flush that writes it (see encoded).
	pack packed
	// packs is the job's hint for pack: how its last chunk was stored
	// (see packChunk).
	packs *atomic.Int32
}

// packed is the stored form of a chunk's data (codec.go).
type packed struct {
	once sync.Once
	data []byte // the zstd frame; nil: stored as is
}

// encoded returns the stored form of data, the chunk's bytes, which no
// longer change: a zstd frame and true, or data and false when it is
// stored as is. A chunk that grows a stored row is always stored as is.
func (c *pendingChunk) encoded(data []byte) ([]byte, bool) {
	c.pack.once.Do(func() {
		if !c.grow {
			c.pack.data = packChunk(data, c.packs)
		}
	})
	if c.pack.data != nil {
		return c.pack.data, true
	}
	return data, false
}

// stored describes the row c is in once written.
func (c *pendingChunk) stored() *tailRow {
	if c.grow && !c.fellBack {
		return &tailRow{seq: c.seq, stream: c.stream, off: c.rowOff, size: c.rowSize + len(c.data), limit: c.rowSize + c.limit}
	}
	return &tailRow{seq: c.seq, stream: c.stream, off: c.off, size: len(c.data), limit: c.limit}
}

// NewAppender returns an Appender writing to d. Call Open to start it.
func NewAppender(d *db.DB, o AppenderOptions) *Appender {
	o.setDefaults()
	a := &Appender{
		d:        d,
		o:        o,
		jobs:     make(map[string]*jobState),
		flushing: make(chan struct{}, 1),
		packers:  make(chan struct{}, runtime.GOMAXPROCS(0)),
		wake:     make(chan struct{}, 1),
		full:     make(chan struct{}, 1),
		up:       d.NewUpkeep(o.MinFree, o.NoCheckpoints),
		sp:       spool{dir: spoolDir(d.Path)},
	}
	a.cond = sync.NewCond(&a.mu)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a
}

// Open starts the flusher goroutine. Until Open, written bytes wait for an
// explicit Flush and Write does not apply back-pressure.
func (a *Appender) Open() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running || a.closed {
		return
	}
	a.running = true
	a.wg.Add(1)
	go a.run()
	a.up.Start()
}

// Close refuses further writes (a Write blocked by back-pressure returns
// ErrClosed), stops the flusher and flushes everything written. It returns
// the error of the final flush.
func (a *Appender) Close() error {
	a.mu.Lock()
	a.closed = true
	a.cond.Broadcast()
	a.mu.Unlock()
	// The checkpointer stops with the flusher, before either is waited
	// for: a checkpoint it has begun is cut short, and it is not woken by
	// the flusher's last commits. Left to run until the flusher was done,
	// it copied the WAL once more beside the final flush, whose restart
	// then waited for it and copied again (BenchmarkAppend256MiB: Close
	// took 68-86 ms of CPU instead of 51-67).
	a.cancel()
	a.up.Stop()
	a.wg.Wait()
	a.flushing <- struct{}{}
	if ou := a.outUp.Load(); ou != nil {
		ou.Stop()
	}
	err := a.flushLocked("", rowsAll)
	// Spooled output gets closeDrain to reach the database; what is still
	// spooled then is dropped and counted, as it would be on a full disk.
	for deadline := time.Now().Add(closeDrain); errors.Is(err, errLocked) && time.Now().Before(deadline); {
		time.Sleep(spoolRetry) // a pause between attempts at the lock
		err = a.flushLocked("", rowsAll)
	}
	for !a.sp.empty() {
		take := a.sp.takes[0]
		a.sp.pop()
		a.settle(take, errLocked, false)
	}
	a.sp.close()
	if a.w != nil {
		// What the checkpointer has not copied yet is copied now, room
		// permitting, so that the WAL does not outlive the appender.
		_ = a.up.Checkpoint(context.Background(), a.w.conn)
		if a.w.out != nil {
			_ = a.outUp.Load().Checkpoint(context.Background(), a.w.out)
		}
	}
	a.dropWriterLocked()
	<-a.flushing
	a.mu.Lock()
	a.running = false
	a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("close appender: %w", err)
	}
	return nil
}

// StopWaiting makes Untrack return without waiting for a job's spooled
// output to be committed: a supervisor that is closing records its jobs'
// ends while a locked database keeps their output in the spool, which
// Close then gives closeDrain.
func (a *Appender) StopWaiting() { a.stopWait.Store(true) }

// closeDrain bounds how long Close waits for a locked database to take the
// spooled output.
const closeDrain = 10 * time.Second

// Track starts tracking jobID, whose output is capped at maxOutput bytes
// (0 = no cap). It resumes the job's offset, line count and chunk sequence
// from the database, so a supervisor that restarts continues where the last
// one stopped. Tracking a tracked job only updates its cap. It returns an
// error wrapping ErrJobNotFound when the jobs row does not exist.
func (a *Appender) Track(jobID string, maxOutput int64) error {
	if maxOutput < 0 {
		return fmt.Errorf("track job %s: negative output cap %d", jobID, maxOutput)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return fmt.Errorf("track job %s: %w", jobID, ErrClosed)
	}
	if st := a.jobs[jobID]; st != nil {
		st.maxOutput, st.head = maxOutput, a.headFor(maxOutput)
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()

	st := &jobState{id: jobID, maxOutput: maxOutput, head: a.headFor(maxOutput)}
	r, ok, err := a.d.ResumeOutput(context.Background(), jobID)
	if err != nil {
		return fmt.Errorf("track job %s: %w", jobID, err)
	}
	if !ok {
		return fmt.Errorf("track job %s: %w", jobID, ErrJobNotFound)
	}
	st.rowOff, st.off, st.lines, st.unkept, st.seq = r.RowBytes, r.Bytes, r.Lines, r.Unkept, r.NextSeq

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("track job %s: %w", jobID, ErrClosed)
	}
	if cur := a.jobs[jobID]; cur != nil { // a concurrent Track won
		cur.maxOutput, cur.head = st.maxOutput, st.head
		return nil
	}
	a.jobs[jobID] = st
	return nil
}

// headFor is the offset below which a job with cap maxOutput is never
// evicted; 0 for no cap.
func (a *Appender) headFor(maxOutput int64) int64 {
	if maxOutput == 0 {
		return 0
	}
	return min(a.o.HeadKeep, maxOutput/2)
}

// Untrack flushes everything written for jobID and forgets it; later writes
// for it fail with ErrNotTracked. It returns the flush's error. The jobs
// row's counters are advanced only when due (see DefaultRowEvery): the
// job's terminal status, which follows, records the final counts
// ([Appender.Totals], db.Transition), and a job whose output the flusher
// has written already costs no transaction here.
func (a *Appender) Untrack(jobID string) error {
	// Only this job's output: every job that ends would otherwise cost a
	// transaction over all the others' few queued lines, which the flusher
	// writes soon anyway (100 jobs ending: 100 extra transactions of 100
	// jobs each).
	//
	// Output of the job that waits in the spool is committed before the
	// job is forgotten, so that its end is not recorded before its output:
	// Untrack waits for the lock, trying again every spoolRetry without
	// holding up the flusher meanwhile.
	for {
		a.flushing <- struct{}{}
		err := a.flushLocked(jobID, rowsWithDrops)
		a.mu.Lock()
		st := a.jobs[jobID]
		a.mu.Unlock()
		waiting := st != nil && a.sp.holds(st)
		<-a.flushing
		if !waiting || a.isClosed() || a.stopWait.Load() {
			a.mu.Lock()
			delete(a.jobs, jobID)
			a.mu.Unlock()
			if err != nil && (waiting || !errors.Is(err, errLocked)) {
				return fmt.Errorf("untrack job %s: %w", jobID, err)
			}
			return nil
		}
		time.Sleep(spoolRetry) // a pause between attempts at the lock
	}
}

// Write appends p, read from stream s of jobID, to the job's output. It
// copies p. It blocks while MaxPendingBytes wait for the database; that wait
// is bounded because a flush that cannot write drops its bytes after
// RetryFor. Output of a job whose row was deleted is discarded. Write returns
// an error only for an invalid stream, an untracked job or a closed
// appender.
func (a *Appender) Write(jobID string, s Stream, p []byte) error {
	if !s.Valid() {
		return fmt.Errorf("write output: invalid stream %q", s)
	}
	a.mu.Lock()
	full, err := a.writeLocked(jobID, s, p)
	if len(full) == 0 {
		a.mu.Unlock()
		return err
	}
	// A chunk this write filled is compressed now, outside the lock, by a
	// goroutine of its own while fewer than GOMAXPROCS do so, else by the
	// child's reader: not by the flusher inside its transaction. Under a
	// flood the reader, the compression and the flusher then share the
	// cores, and a reader that outruns the compression helps with it. The
	// chunk's data no longer changes; the flusher takes the chunk all the
	// same and waits for its compression if it gets there first (encoded).
	data := make([][]byte, len(full))
	for i, c := range full {
		data[i] = c.data
	}
	a.mu.Unlock()
	for i, c := range full {
		select {
		case a.packers <- struct{}{}:
			go func() {
				defer func() { <-a.packers }()
				c.encoded(data[i])
			}()
		default:
			c.encoded(data[i])
		}
	}
	return err
}

// writeLocked is Write with a.mu held; it returns the chunks it filled
// that are worth compressing.
func (a *Appender) writeLocked(jobID string, s Stream, p []byte) (full []*pendingChunk, err error) {
	for a.running && !a.closed && a.pending >= a.o.MaxPendingBytes {
		a.cond.Wait()
	}
	if a.closed {
		return nil, fmt.Errorf("write output: %w", ErrClosed)
	}
	st := a.jobs[jobID]
	if st == nil {
		return nil, fmt.Errorf("write output of job %s: %w", jobID, ErrNotTracked)
	}
	if st.gone || len(p) == 0 {
		return nil, nil
	}
	now := a.d.Now()
	n := len(p)
	for len(p) > 0 {
		var c *pendingChunk
		if k := len(st.queue); k > 0 {
			c = st.queue[k-1]
			if c.stream != s || len(c.data) >= c.limit {
				c = nil
			}
		}
		if c == nil && len(st.queue) == 0 {
			if c = st.growTail(s, now); c != nil {
				st.queue = append(st.queue, c)
			}
		}
		if c == nil {
			limit := a.o.MaxChunk
			if st.off < st.head && st.head-st.off < int64(limit) {
				limit = int(st.head - st.off) // the head ends on a chunk boundary
			}
			c = &pendingChunk{
				seq: st.seq, stream: s, off: st.off, firstLine: st.lines, limit: limit, at: now,
				data: a.chunkBuf(chunkCap(limit, len(p))), packs: &st.packs,
			}
			st.seq++
			st.queue = append(st.queue, c)
		}
		part := p[:min(len(p), c.limit-len(c.data))]
		nl := int64(bytes.Count(part, newline))
		c.data = append(c.data, part...)
		c.lineCount += nl
		c.at = now
		st.off += int64(len(part))
		st.lines += nl
		p = p[len(part):]
		if len(c.data) == c.limit && !c.grow && c.limit >= compressMin {
			full = append(full, c)
		}
	}
	st.lastWrite = now
	if a.queued == 0 {
		signal(a.wake)
	}
	a.queued += n
	a.pending += n
	if a.queued >= a.o.MaxBatchBytes {
		signal(a.full)
	}
	return full, nil
}

var newline = []byte{'\n'}

// chunkCap is the capacity of a new chunk of at most limit bytes whose
// first write is n bytes: a write of a flood (a pipe read of 16 KiB or
// more) starts a chunk that it and the next ones fill, so it gets its limit
// at once rather than through the copies of append; a trickle's chunk
// starts small.
func chunkCap(limit, n int) int {
	if n >= 16<<10 {
		return limit
	}
	return min(limit, max(n, 512))
}

// growTail returns a pending chunk that extends st's newest stored row with
// stream s, or nil when there is none to extend: the row is of another
// stream, already GrowChunk bytes or its limit, or not the last bytes of
// the job (a flush is writing newer ones).
func (st *jobState) growTail(s Stream, now time.Time) *pendingChunk {
	t := st.tail
	if t == nil || t.stream != s || t.off+int64(t.size) != st.off {
		return nil
	}
	room := min(GrowChunk, t.limit) - t.size
	if room <= 0 {
		return nil
	}
	return &pendingChunk{
		seq: t.seq, stream: s, off: st.off, firstLine: st.lines, limit: room, at: now,
		data: make([]byte, 0, room), grow: true, rowOff: t.off, rowSize: t.size,
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Flush returns when everything written before the call is in the database,
// or was dropped (then it returns why). ctx bounds only the wait for a flush
// already running; a flush once started is not abandoned.
func (a *Appender) Flush(ctx context.Context) error {
	select {
	case a.flushing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("flush output: %w", ctx.Err())
	}
	err := a.flushLocked("", rowsAll)
	<-a.flushing
	if err != nil {
		return fmt.Errorf("flush output: %w", err)
	}
	return nil
}

// flushGrid is the origin of every appender's grid of flushes (monotonic).
var flushGrid = time.Now()

// CheckpointSoon wakes the checkpointer (db.Upkeep.Wake): a supervisor
// calls it now and then, so that the WAL is copied also when little output
// comes.
func (a *Appender) CheckpointSoon() {
	a.up.Wake()
	if ou := a.outUp.Load(); ou != nil {
		ou.Wake()
	}
}

// Reclaim copies the WAL into the database file and truncates it when the
// disk is tight (db.Upkeep.Reclaim). A supervisor calls it before
// recording a job's end, so that the end finds the whole reserve. It
// returns whether the disk was tight.
func (a *Appender) Reclaim(ctx context.Context) bool {
	if ou := a.outUp.Load(); ou != nil {
		ou.Reclaim(ctx)
	}
	return a.up.Reclaim(ctx)
}

// FlushInterval is the spacing of the flushes of a trickle.
func (a *Appender) FlushInterval() time.Duration { return a.o.FlushInterval }

// NextFlush is the time, after now, of the next flush of written bytes that
// do not fill a batch. Flushes of a trickle fall on a grid of FlushInterval,
// so that a reader that pauses between reads can read just before each and
// have its bytes written at once, one read and one transaction per
// interval.
func (a *Appender) NextFlush(now time.Time) time.Time {
	return now.Add(a.untilFlush(now))
}

func (a *Appender) untilFlush(now time.Time) time.Duration {
	f := a.o.FlushInterval
	return f - now.Sub(flushGrid)%f
}

// run is the flusher: it waits for a first byte, waits for the next point
// of its grid (or less when a batch fills up) and flushes.
func (a *Appender) run() {
	defer a.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.wake:
		case <-retry:
		}
		retry = nil
		a.mu.Lock()
		full := a.queued >= a.o.MaxBatchBytes
		a.mu.Unlock()
		if !full {
			t := time.NewTimer(a.untilFlush(time.Now()))
			select {
			case <-t.C:
			case <-a.full:
			case <-a.ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
		spooled := errors.Is(a.flush(), errLocked)
		switch drops, behind := a.rowsBehind(); {
		case spooled:
			retry = time.After(spoolRetry)
		case drops:
			// Nothing may be written for a while: try again later to put
			// the dropped count in the jobs rows.
			retry = time.After(a.o.RetryFor)
		case behind:
			// A job that went quiet has its row advanced once it is due.
			retry = time.After(a.o.RowEvery)
		}
	}
}

// rowsBehind reports whether a job has drops its row does not count yet,
// and whether a job's row is behind its output.
func (a *Appender) rowsBehind() (drops, behind bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range a.jobs {
		if st.gone {
			continue
		}
		drops = drops || st.dropped > 0
		behind = behind || st.rowOff < st.off
	}
	return drops, behind
}

func (a *Appender) flush() error {
	a.flushing <- struct{}{}
	defer func() { <-a.flushing }()
	return a.flushLocked("", rowsDue)
}

// jobBatch is what one flush writes for one job.
type jobBatch struct {
	st      *jobState
	chunks  []*pendingChunk
	bytes   int64 // bytes in chunks
	end     int64 // output_bytes after this batch
	lines   int64 // output_lines after this batch
	last    time.Time
	dropped int64 // earlier drops to record
	// unkept is st.unkept once this batch is written: its drops added,
	// and set by the writer from the row when it asked it, plus what it
	// evicted.
	unkept    int64
	advance   bool  // write the counters to the jobs row (see DefaultRowEvery)
	maxOutput int64 // st.maxOutput and st.head at the take
	head      int64
	gone      bool  // set by the writer: the jobs row is gone
	failed    error // set by the writer: this job's rows were refused
}

// rowPolicy says which jobs rows a flush advances (see DefaultRowEvery).
type rowPolicy int

const (
	rowsDue       rowPolicy = iota // rows behind for RowEvery, and rows with drops
	rowsAll                        // every row behind
	rowsWithDrops                  // only rows with drops to record
)

// flushLocked writes the queued chunks of jobID, or of every job when jobID
// is "", and advances the jobs rows rows says; the caller holds a.flushing.
// A batch that cannot take the write lock goes to the spool, and while the
// spool holds output, every job's queue follows it there and the spool is
// committed instead (see spool.go). It returns an error wrapping errLocked
// while output stays spooled.
func (a *Appender) flushLocked(jobID string, rows rowPolicy) error {
	if !a.sp.empty() {
		return a.flushSpoolLocked(rows)
	}
	a.mu.Lock()
	batch := a.takeLocked(jobID, rows)
	degraded := a.degraded
	a.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := a.writeWithRetry(&batch, degraded, true)
	if errors.Is(err, errLocked) {
		if err = a.spillLocked(batch); err == nil {
			return fmt.Errorf("spool output: %w", errLocked)
		}
	}
	a.settle(batch, err, true)
	a.recycle(batch)
	return err
}

// chunkBuf returns an empty buffer of capacity n for a new chunk: one a
// written chunk gave back when n is MaxChunk (a flood's), else a new one.
func (a *Appender) chunkBuf(n int) []byte {
	if n == a.o.MaxChunk {
		if b, ok := a.bufs.Get().(*[]byte); ok {
			return (*b)[:0]
		}
		a.bufsMade.Add(1)
	}
	return make([]byte, 0, n)
}

// recycle gives the buffers of batch's chunks, settled, back for new
// chunks. Under a flood every chunk is a new MaxChunk buffer; freed to the
// garbage collector, each cost page faults, a share of the collections and
// of the scavenger's returning memory to the system, which was about a
// seventh of a text flood's supervisor CPU. Once settled, a chunk's rows
// are committed or dropped and the job's state keeps only the row's place
// (stored); what may still read its data is the goroutine Write started to
// compress it, when the write did not need the compression (a dropped
// batch, rows written job by job) and that goroutine has not run or not
// finished: the chunk's compression is closed first, waiting for it if it
// runs, so that it never starts after.
func (a *Appender) recycle(batch []jobBatch) {
	for _, b := range batch {
		for _, c := range b.chunks {
			if cap(c.data) == a.o.MaxChunk {
				c.pack.once.Do(func() {})
				buf := c.data[:0]
				c.data = nil
				a.bufs.Put(&buf)
			}
		}
	}
}

// spoolRetry is how soon a flusher with spooled output tries the lock
// again, and spoolBusy how long each try waits for it.
const (
	spoolRetry = 50 * time.Millisecond
	spoolBusy  = 100 * time.Millisecond
)

// flushSpoolLocked moves every job's queue to the spool and commits the
// spool, oldest take first, one transaction each, for as long as it gets
// the lock; the caller holds a.flushing.
func (a *Appender) flushSpoolLocked(rows rowPolicy) error {
	var last error
	a.spillQueuedLocked(rows)
	for !a.sp.empty() {
		take := a.sp.takes[0]
		var n int
		for _, b := range take {
			n += int(b.bytes)
		}
		_, err := a.sp.load()
		if err == nil {
			// The loaded take counts as pending, so that memory stays
			// under MaxPendingBytes as when a batch is written from
			// memory.
			a.mu.Lock()
			degraded := a.degraded
			a.pending += n
			a.mu.Unlock()
			// No batch of memory joins the transaction: it would be
			// committed before older spooled output of its job.
			err = a.writeWithRetry(&take, degraded, false)
			if errors.Is(err, errLocked) {
				a.sp.unload()
				a.unpend(n)
				return fmt.Errorf("spool output: %w", err)
			}
			a.unpend(n)
		}
		a.sp.pop()
		a.settle(take, err, false)
		a.sp.unloadTake(take)
		if err != nil {
			// Writes fail, and not for the lock: the takes still spooled
			// are tried once each, and nothing joins the spool until the
			// next flush. Each failed take leaves a drop count to record,
			// which spilled here failed in turn, and so on: the flush
			// never ended.
			last = err
			continue
		}
		// What the children wrote meanwhile joins the end of the spool, so
		// that they do not wait for the whole spool to be committed.
		a.spillQueuedLocked(rows)
	}
	return last
}

// unpend takes n bytes off pending and wakes the writers waiting for room.
func (a *Appender) unpend(n int) {
	a.mu.Lock()
	a.pending -= n
	a.cond.Broadcast()
	a.mu.Unlock()
}

// spillQueuedLocked moves every job's queue to the spool, unless the spool
// is full: then the output waits in memory, and Write blocks once
// MaxPendingBytes wait. Output that cannot be spooled (a full disk) is
// dropped and counted.
func (a *Appender) spillQueuedLocked(rows rowPolicy) {
	a.mu.Lock()
	if a.sp.held+int64(a.queued) > a.o.MaxSpoolBytes {
		a.mu.Unlock()
		return
	}
	batch := a.takeLocked("", rows)
	a.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := a.spillLocked(batch); err != nil {
		a.settle(batch, err, true)
	}
}

// spillLocked appends batch to the spool and releases its memory; the
// caller holds a.flushing.
func (a *Appender) spillLocked(batch []jobBatch) error {
	var n int64
	for _, b := range batch {
		n += b.bytes
	}
	if err := a.up.CheckRoom(n); err != nil {
		return err
	}
	if err := a.sp.spill(batch); err != nil {
		return err
	}
	a.mu.Lock()
	a.pending -= int(n)
	a.cond.Broadcast()
	a.mu.Unlock()
	return nil
}

// settle records the outcome of writing batch (err: dropped) in the jobs'
// states; inPending says whether its bytes still count as pending.
func (a *Appender) settle(batch []jobBatch, err error, inPending bool) {
	var total int
	a.mu.Lock()
	for i := range batch {
		b := &batch[i]
		total += int(b.bytes)
		switch {
		case b.gone:
			// What was queued since the take is discarded with the job.
			for _, c := range b.st.queue {
				a.queued -= len(c.data)
				a.pending -= len(c.data)
			}
			b.st.gone, b.st.queue, b.st.dropped = true, nil, 0
		case err != nil || b.failed != nil:
			b.st.dropped += b.dropped + b.bytes
			b.st.tail = nil
		default:
			b.st.unkept = max(b.st.unkept, b.unkept)
			if b.advance {
				b.st.rowAt, b.st.rowOff = time.Now(), max(b.st.rowOff, b.end)
			}
			if len(b.chunks) > 0 {
				b.st.tail = b.chunks[len(b.chunks)-1].stored()
			}
		}
	}
	a.degraded = err != nil
	if inPending {
		a.pending -= total
	}
	a.cond.Broadcast()
	a.mu.Unlock()

	if a.o.OnDropped != nil {
		for _, b := range batch {
			why := err
			if why == nil {
				why = b.failed
			}
			if why != nil && !b.gone && b.bytes > 0 {
				a.o.OnDropped(b.st.id, b.bytes, why)
			}
		}
	}
}

// takeLocked moves the queue of jobID (every job's when jobID is "") into a
// batch; a.mu is held.
func (a *Appender) takeLocked(jobID string, rows rowPolicy) []jobBatch {
	now := time.Now()
	if jobID != "" {
		st := a.jobs[jobID]
		if st == nil {
			return nil
		}
		b, ok := a.takeJobLocked(st, rows, now)
		if !ok {
			return nil
		}
		return []jobBatch{b}
	}
	var batch []jobBatch
	for _, st := range a.jobs {
		if b, ok := a.takeJobLocked(st, rows, now); ok {
			batch = append(batch, b)
		}
	}
	return batch
}

// takeJobLocked moves st's queue into a batch, which advances the jobs row
// as rows says; a.mu is held.
func (a *Appender) takeJobLocked(st *jobState, rows rowPolicy, now time.Time) (jobBatch, bool) {
	advance := st.dropped > 0 || st.rowOff < st.off &&
		(rows == rowsAll || rows == rowsDue && now.Sub(st.rowAt) >= a.o.RowEvery)
	if st.gone || (len(st.queue) == 0 && !advance) {
		return jobBatch{}, false
	}
	b := jobBatch{st: st, chunks: st.queue, end: st.off, lines: st.lines, last: st.lastWrite, dropped: st.dropped,
		unkept: st.unkept + st.dropped, advance: advance, maxOutput: st.maxOutput, head: st.head}
	for _, c := range st.queue {
		b.bytes += int64(len(c.data))
	}
	st.queue, st.dropped = nil, 0
	a.queued -= int(b.bytes)
	return b, true
}

// takeMore returns the next batch when a flood has queued MaxBatchBytes
// again while a transaction was being written, so that the transaction goes
// on instead of committing: fewer, larger transactions keep up with a flood.
// The batches stay counted as pending until the commit, so memory stays
// under MaxPendingBytes.
func (a *Appender) takeMore() []jobBatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queued < a.o.MaxBatchBytes {
		return nil
	}
	return a.takeLocked("", rowsDue)
}

// writeWithRetry writes batch, retrying a failure for RetryFor (once only
// when degraded), but not a lock held elsewhere (errLocked), which the
// spool waits out. With more, the writer may append batches taken while it
// ran.
func (a *Appender) writeWithRetry(batch *[]jobBatch, degraded, more bool) error {
	deadline := time.Now().Add(a.o.RetryFor)
	backoff := 20 * time.Millisecond
	for {
		err := a.writeBatch(batch, more)
		if err == nil || errors.Is(err, errLocked) || degraded || time.Now().Add(backoff).After(deadline) {
			return err
		}
		time.Sleep(backoff) // a pause between attempts, not a wait for an event
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
