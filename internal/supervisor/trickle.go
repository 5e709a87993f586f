package supervisor

import (
	"sync"
	"time"
)

// A trickler reads the pipes of trickling jobs for their pumps, all of them
// in one pass readLead before each of the appender's flushes.
//
// A pump that paced its own reads woke on a timer of its own before every
// flush: with many trickling jobs, many goroutine wake-ups a second, each
// a timer, a read and a pass of the scheduler, for a few bytes each. A
// pump whose child
// writes too slowly to fill half its pipe between two flushes hands the pipe
// to the trickler and sleeps until it comes back: when the pipe stayed
// empty idleTicks times, the child speeds up, the pipe ends or fails, or the
// job's drain deadline passes. The pump then goes on as before.
type trickler struct {
	r *runners

	mu      sync.Mutex
	pipes   map[*tricklePipe]struct{}
	running bool          // the reading goroutine runs; it exits when pipes is empty
	now     chan struct{} // a round at once: a job's main process exited (buffered, 1)
}

// tricklePipe is a pipe held by the trickler.
type tricklePipe struct {
	p     *pipe
	emit  func([]byte)
	drain *pipeDrain
	last  time.Time // the last read
	empty int       // empty reads in a row
	back  chan struct{}
}

// readNow makes the trickler read every pipe it holds at once rather than
// before the next flush: a job's main process has exited, and its pipes
// are best drained now so that the job ends without that wait.
func (t *trickler) readNow() {
	select {
	case t.now <- struct{}{}:
	default:
	}
}

// hold gives p to the trickler and returns when the trickler gives it
// back. last is when p was last read.
func (t *trickler) hold(p *pipe, emit func([]byte), drain *pipeDrain, last time.Time) {
	tp := &tricklePipe{p: p, emit: emit, drain: drain, last: last, back: make(chan struct{})}
	t.mu.Lock()
	t.pipes[tp] = struct{}{}
	if !t.running {
		t.running = true
		go t.run()
	}
	t.mu.Unlock()
	<-tp.back
}

// run reads every held pipe once before each flush until none is held.
func (t *trickler) run() {
	buf := make([]byte, 64<<10)
	var round []*tricklePipe
	for {
		pace := time.NewTimer(t.r.trickleWait(timeNow())) // pacing the reads to the flushes
		select {
		case <-pace.C:
		case <-t.now:
			pace.Stop()
		}
		t.mu.Lock()
		if len(t.pipes) == 0 {
			t.running = false
			t.mu.Unlock()
			return
		}
		round = round[:0]
		for tp := range t.pipes {
			round = append(round, tp)
		}
		t.mu.Unlock()
		at := timeNow()
		for _, tp := range round {
			if tp.read(buf, at) {
				continue
			}
			t.mu.Lock()
			delete(t.pipes, tp)
			t.mu.Unlock()
			close(tp.back)
		}
	}
}

// read reads tp once and reports whether the trickler keeps it.
func (tp *tricklePipe) read(buf []byte, now time.Time) bool {
	n, err := tp.p.readEmit(buf, tp.emit)
	if err != nil {
		return false // EOF or worse: the pump sees it again and ends
	}
	if !tp.drain.get().IsZero() {
		// The job's main process has exited. The pipe ends when the last
		// process holding it does, often a moment later (a killed tree
		// dies one process at a time): its pump waits for that in the
		// netpoller, which wakes it at once, not at the next round.
		return false
	}
	if n == 0 {
		tp.empty++
		return tp.empty < idleTicks
	}
	tp.empty = 0
	since := now.Sub(tp.last)
	tp.last = now
	// Keep it while half the pipe takes the child longer than a round.
	return tp.p.pause(n, since) >= since
}
