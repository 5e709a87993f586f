package supervisor

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/logs"
)

// How a pump reads its pipe, and why.
//
// A pipe in Go's netpoller costs a wakeup of the poller for every write the
// child makes, whether or not a goroutine waits for it: the poller is
// edge-triggered and each write is an edge. With many jobs printing many
// lines a second, those wakeups and context switches were most of the
// supervisor's CPU.
//
// So a pump keeps its pipe out of the netpoller while the child is
// writing. It reads without blocking, and after each read pauses for as long
// as the child, at the pace it just showed, takes to fill half the pipe, but
// no later than readLead before the appender's next flush; a flood, which
// fills the pipe between two reads, is not paused at all. A trickle, too
// slow to fill half the pipe in a flush interval, is read once per flush,
// just in time for it, by the supervisor's trickler (trickle.go), which
// reads every trickling pipe in one pass while their pumps sleep. Only when the pipe stays empty
// (an idle job, a quiet stderr, a flood that outran its child) does the
// pump wait for data in the netpoller, through a duplicate of the
// descriptor registered for that wait alone. A trickle shows within the
// appender's flush interval plus readLead and a commit.
const (
	// readLead is how long before a flush of the appender a trickling pump
	// reads, so that what it reads makes that flush despite a busy
	// scheduler.
	readLead = 10 * time.Millisecond
	// pipeHalf is half the capacity of a Linux pipe (64 KiB): pausing
	// until about this much waits never blocks a steady writer.
	pipeHalf = 32 << 10
	// ptyHalf stands for pipeHalf on a pty's master, which a read empties
	// at most 4 KiB at a time (the terminal's line discipline buffer): a
	// read of half that or more may have found it full.
	ptyHalf = 2 << 10
	// minReadPause: shorter pauses are not worth a timer.
	minReadPause = time.Millisecond
	// idleTicks is how many empty reads, one a flush, send a trickling
	// pump to wait in the netpoller.
	idleTicks = 2
	// finalSweep bounds the last read of a pipe after its drain deadline
	// passed, which takes what is already buffered, so that it is not lost
	// when the reader was busy with the appender when the deadline hit.
	finalSweep = 100 * time.Millisecond
)

// readPause is how long the child takes, at the pace of a read of n bytes
// that came in over since, to fill half the pipe; 0 when that is too short
// to wait for, or when the read took half a pipe or more: then the pipe
// may have been full, the child blocked (while the appender held the pump
// back), and its pace is unknown. Pausing there slowed a 256 MiB capture
// to a crawl of sleeps.
func readPause(n int, since time.Duration) time.Duration {
	return readPauseOf(n, since, pipeHalf)
}

// readPauseOf is readPause for a descriptor whose reads take at most
// 2×half bytes.
func readPauseOf(n int, since time.Duration, half int) time.Duration {
	if n <= 0 || n >= half {
		return 0
	}
	d := time.Duration(float64(since) * float64(half) / float64(n))
	if d < minReadPause {
		return 0
	}
	return d
}

// trickleWait is how long a pump waits, at now, to read readLead before
// one of the appender's flushes.
func (r *runners) trickleWait(now time.Time) time.Duration {
	return r.app.NextFlush(now.Add(readLead+minReadPause)).Sub(now) - readLead
}

// pipeDrain is the drain deadline of one job's pipes, set once its main
// process has exited; the zero deadline is none. It reaches the pumps that
// wait in the netpoller at that moment as a read deadline.
type pipeDrain struct {
	mu       sync.Mutex
	deadline time.Time
	waiting  map[*os.File]struct{}
	exited   chan struct{} // closed by set: pausing pumps read at once
}

func (d *pipeDrain) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deadline = t
	for f := range d.waiting {
		f.SetReadDeadline(t)
	}
	select {
	case <-d.exitedLocked():
	default:
		close(d.exited)
	}
}

// done returns a channel closed once the deadline is set: the main process
// has exited, and what is left in the pipes is best read now, so that the
// job ends without waiting for the next paced read.
func (d *pipeDrain) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exitedLocked()
}

// exitedLocked returns d.exited, made on first use (a zero pipeDrain is
// ready to use); d.mu is held.
func (d *pipeDrain) exitedLocked() chan struct{} {
	if d.exited == nil {
		d.exited = make(chan struct{})
	}
	return d.exited
}

func (d *pipeDrain) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// enter registers f, about to be read in the netpoller, and gives it the
// deadline.
func (d *pipeDrain) enter(f *os.File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = map[*os.File]struct{}{}
	}
	d.waiting[f] = struct{}{}
	if !d.deadline.IsZero() {
		f.SetReadDeadline(d.deadline)
	}
}

func (d *pipeDrain) leave(f *os.File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waiting, f)
}

// pipePair keeps the order of a job's stdout and stderr. Two pumps that
// each read their pipe in their own time cannot tell which of two writes,
// one on each pipe, came first: a pump that paces its reads (see above)
// holds what its child wrote for up to a flush interval, while the other
// pipe's writes of that interval are read, and a combined read then shows
// them out of order. So the reads of both pipes, each with the appender's
// Write of what it read, happen under one lock, and each read of a pipe
// first takes what the other holds, unless the other's pump waits in the
// netpoller and so reads it as it comes: what waited there was written
// before.
// And at most one of the two pumps paces its reads at a time; the other
// reads each write as it comes, in the netpoller, so that whenever both
// streams are busy every write of one is read, with the other's before
// it, as it comes. A job that writes to one stream only (most) keeps its
// paced reads: its quiet pipe waits in the netpoller and never paces.
type pipePair struct {
	mu    sync.Mutex
	pipes [2]*pipe        // by side; nil until joined and after closing
	emits [2]func([]byte) // by side
	pacer *pipe           // the pipe whose pump may pace its reads
	buf   []byte          // for reading the other pipe, made on first use
}

// pipe is the read end of a child's pipe outside the netpoller:
// non-blocking and close-on-exec.
type pipe struct {
	fd   int
	pair *pipePair // nil: read alone
	side int       // its index in pair
	// polled: its pump waits in the netpoller, which wakes it as data
	// comes, so the other pump need not look (guarded by pair.mu).
	polled bool
	// half is pipeHalf, or ptyHalf for a pty's master.
	half int
}

// pause is readPause for p.
func (p *pipe) pause(n int, since time.Duration) time.Duration {
	return readPauseOf(n, since, p.half)
}

// join makes p one of pair's two pipes; emit takes what is read from it.
func (p *pipe) join(pair *pipePair, side int, emit func([]byte)) {
	pair.mu.Lock()
	defer pair.mu.Unlock()
	p.pair, p.side = pair, side
	pair.pipes[side], pair.emits[side] = p, emit
}

// readEmit reads what p holds without waiting, as read does, and passes
// it to emit; when p is one of a pair, what the other pipe holds is read
// and passed on first.
func (p *pipe) readEmit(buf []byte, emit func([]byte)) (int, error) {
	if pp := p.pair; pp != nil {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		if o := pp.pipes[1-p.side]; o != nil && !o.polled {
			if pp.buf == nil {
				pp.buf = make([]byte, 64<<10) // only jobs writing both streams
			}
			// Bounded: a flood on the other pipe is its own pump's.
			for range 4 {
				n, err := o.read(pp.buf)
				if n > 0 {
					pp.emits[o.side](pp.buf[:n])
				}
				if n < len(pp.buf) || err != nil {
					break
				}
			}
		}
	}
	n, err := p.read(buf)
	if n > 0 {
		emit(buf[:n])
	}
	return n, err
}

// readAll reads what both pipes hold now and passes it on, under the lock
// every read of the pair takes, so that its bytes keep their order with
// the pumps' reads (Supervisor.Sync).
func (pp *pipePair) readAll() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for side, p := range pp.pipes {
		if p == nil {
			continue
		}
		if pp.buf == nil {
			pp.buf = make([]byte, 64<<10)
		}
		// Bounded: a job still writing is its pumps' to read.
		for range 16 {
			n, err := p.read(pp.buf)
			if n > 0 {
				pp.emits[side](pp.buf[:n])
			}
			if n < len(pp.buf) || err != nil {
				break
			}
		}
	}
}

// pace reports whether p's pump may pace its reads: it is not one of a
// pair, or the other pump does not pace.
func (p *pipe) pace() bool {
	pp := p.pair
	if pp == nil {
		return true
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.pacer == nil {
		pp.pacer = p
	}
	return pp.pacer == p
}

// unpace lets the other pump of p's pair pace.
func (p *pipe) unpace() {
	if pp := p.pair; pp != nil {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		if pp.pacer == p {
			pp.pacer = nil
		}
	}
}

// newPipe takes r out of the netpoller: it duplicates the descriptor and
// closes r, which unregisters it.
func newPipe(r *os.File) (*pipe, error) {
	rc, err := r.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(f uintptr) { fd, dupErr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	r.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &pipe{fd: fd, half: pipeHalf}, nil
}

func (p *pipe) close() {
	if pp := p.pair; pp != nil {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		pp.pipes[p.side] = nil
		if pp.pacer == p {
			pp.pacer = nil
		}
	}
	unix.Close(p.fd)
}

// read reads what the pipe holds without waiting: 0 and no error when it
// is empty, io.EOF when every writer has closed it.
func (p *pipe) read(buf []byte) (int, error) {
	for {
		n, err := unix.Read(p.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, nil
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// wait reads as readEmit does, waiting in the netpoller for data, EOF or
// the drain deadline, through a duplicate of the descriptor registered for
// this wait alone.
func (p *pipe) wait(buf []byte, drain *pipeDrain, emit func([]byte)) (int, error) {
	fd, err := unix.FcntlInt(uintptr(p.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), "pipe") // non-blocking, so pollable
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	drain.enter(f)
	defer drain.leave(f)
	p.setPolled(true)
	defer p.setPolled(false)
	var n int
	var rerr error
	err = rc.Read(func(uintptr) bool {
		n, rerr = p.readEmit(buf, emit)
		return n > 0 || rerr != nil
	})
	if err != nil {
		return n, err // the drain deadline
	}
	return n, rerr
}

// setPolled records whether p's pump waits in the netpoller.
func (p *pipe) setPolled(on bool) {
	if pp := p.pair; pp != nil {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		p.polled = on
	}
}

// sweep reads what the pipe still holds, for at most finalSweep.
func (p *pipe) sweep(buf []byte, emit func([]byte)) {
	end := timeNow().Add(finalSweep)
	for timeNow().Before(end) {
		n, err := p.readEmit(buf, emit)
		if n == 0 || err != nil {
			return
		}
	}
}

// jobOutput is one of a job's output pipes as its pump reads it: outside
// the netpoller and joined to the job's pair, or, where that could not be
// made, the file read the plain way.
type jobOutput struct {
	p    *pipe
	f    *os.File // when p is nil
	emit func([]byte)
}

// openOutputs takes the job's output pipes over as soon as its process
// exists, before anyone can ask for the job: from then on Sync reads what
// they hold (pipePair.readAll), however late the runner and its pumps are
// scheduled on a loaded machine.
func (r *runners) openOutputs(jobID string, pair *pipePair, cio *childIO) []*jobOutput {
	outs := []*jobOutput{r.openOutput(jobID, cio.stream, cio.out, pair, 0)}
	if cio.err != nil {
		outs = append(outs, r.openOutput(jobID, logs.Stderr, cio.err, pair, 1))
	}
	return outs
}

func (r *runners) openOutput(jobID string, stream logs.Stream, f *os.File, pair *pipePair, side int) *jobOutput {
	o := &jobOutput{f: f, emit: func(p []byte) {
		if err := r.app.Write(jobID, stream, p); err != nil {
			r.noteDropped(jobID, int64(len(p)), err)
		}
	}}
	p, err := newPipe(f)
	if err != nil {
		// Cannot happen with a pipe from os.Pipe; read it the plain way.
		r.s.logf("read output of job %s: %v", jobID, err)
		return o
	}
	if stream == logs.PTY {
		p.half = ptyHalf
	}
	p.join(pair, side, o.emit)
	o.p = p
	return o
}

// pump copies one pipe into the appender until EOF or the drain deadline,
// and closes it. The appender's Write blocks while the database lags, which
// slows the child through the full pipe without using memory; it never
// fails for long on a dead database (it drops and counts instead), so the
// pipe keeps draining and the child never hangs on us.
//
// Reads go straight into a 64 KiB buffer (a pipe's whole capacity, the
// size of a chunk row), which the appender copies into its chunk.
func (r *runners) pump(o *jobOutput, drain *pipeDrain) {
	buf := make([]byte, 64<<10)
	if o.p == nil {
		pumpFile(o.f, buf, o.emit, drain)
		return
	}
	p, emit := o.p, o.emit
	defer p.close()
	var err error

	waiting := true // in the netpoller: how a pipe starts, quiet
	trickle := false
	empty := 0
	last := timeNow()
	for {
		var n int
		if waiting {
			n, err = p.wait(buf, drain, emit)
		} else {
			n, err = p.readEmit(buf, emit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.sweep(buf, emit)
			return
		}
		if err != nil {
			return // EOF, or the pipe is unreadable
		}
		now := timeNow()
		deadline := drain.get()
		if !deadline.IsZero() && !now.Before(deadline) {
			p.sweep(buf, emit)
			return
		}
		var pause time.Duration
		switch {
		case n > 0:
			waiting, empty = false, 0
			if pause = p.pause(n, now.Sub(last)); pause > 0 && !p.pace() {
				// The other stream's pump paces: this one reads each
				// write as it comes (see pipePair).
				waiting, trickle = true, false
				last = now
				continue
			}
			if pause > 0 {
				wait := r.trickleWait(now)
				if pause >= wait+r.app.FlushInterval() && deadline.IsZero() {
					// Too slow to fill half the pipe by the flush after
					// next: one read a flush is enough, the trickler's.
					r.trickle.hold(p, emit, drain, now)
					waiting, trickle, last = false, false, timeNow()
					continue
				}
				pause = min(pause, wait)
			}
			trickle = pause > 0
		case trickle && empty < idleTicks:
			empty++
			pause = r.trickleWait(now)
		default:
			// Nothing came in: the job is quiet, or its flood paused.
			p.unpace()
			waiting, trickle = true, false
			last = now
			continue
		}
		if !deadline.IsZero() {
			pause = min(pause, deadline.Sub(now))
		}
		if pause > 0 {
			t := time.NewTimer(pause) // pacing the reads
			select {
			case <-t.C:
			case <-drain.done():
				t.Stop()
			}
			now = timeNow()
		}
		last = now
	}
}

// pumpFile is the pump over r in the netpoller, for a pipe that cannot be
// taken out of it.
func pumpFile(r *os.File, buf []byte, emit func([]byte), drain *pipeDrain) {
	defer r.Close()
	drain.enter(r)
	defer drain.leave(r)
	swept := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			emit(buf[:n])
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !swept {
			swept = true
			r.SetReadDeadline(timeNow().Add(finalSweep))
			continue
		}
		return
	}
}
