package supervisor

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/sigreset"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/vocab"
)

// runners is the service that owns the supervisor's children: for each, a
// runner goroutine (child.go) that pumps its pipes into the output
// appender (pump.go, trickle.go), waits for it and records its end; the
// appender; the process's share of the Reaper. Its context scopes the
// retries of the writes that must land (persist); a runner does not stop
// on it, its child is ended explicitly (endAll).
type runners struct {
	startstop.Base
	s *Supervisor

	app     *logs.Appender
	trickle trickler // reads the pipes of trickling jobs
	reaper  *proc.Reaper
	endMu   sync.Mutex // one job's end at a time on a tight disk (reserveForEnd)
	// noCgroup is set once the system turned out to offer no cgroup for
	// jobs (see jobCgroup).
	noCgroup atomic.Bool
	// wg counts the runner goroutines and their helpers, from register
	// on.
	wg       sync.WaitGroup
	stopOnce atomic.Bool // set by the Stop that closes the appender

	mu        sync.Mutex
	children  map[string]*child
	idleSince time.Time // when the last child went
	dropped   map[string]*dropNote

	// holdPumps, when set (by a test only), holds every runner back
	// until it is closed, before its pumps read anything.
	holdPumps chan struct{}
}

// dropNote accumulates output the database could not take, until the
// job's runner records it as an output_dropped event.
type dropNote struct {
	bytes int64
	err   string
}

func newRunners(s *Supervisor) *runners {
	return &runners{s: s, children: map[string]*child{}, dropped: map[string]*dropNote{}}
}

// Start makes the process a child subreaper, opens the output appender
// and starts the idle period.
func (r *runners) Start(ctx context.Context) error {
	r.Init(ctx)
	r.reaper = acquireReaper(r.s.cfg.Logf)
	ao := logs.ProcessOptions(r.noteDropped)
	ao.FlushInterval = r.s.cfg.FlushInterval
	ao.OnOutputFileError = func(err error) {
		r.s.logf("output data file: %v: storing all output in the database from now on", err)
	}
	r.app = logs.NewAppender(r.s.db, ao)
	r.trickle = trickler{r: r, pipes: map[*tricklePipe]struct{}{}, now: make(chan struct{}, 1)}
	r.app.Open()
	r.mu.Lock()
	r.idleSince = time.Now()
	r.mu.Unlock()
	return nil
}

// Stop waits for the runners, which endAll has ended, flushes and closes
// the appender and releases the Reaper.
func (r *runners) Stop() error {
	r.Halt()
	r.wg.Wait()
	if r.app == nil || !r.stopOnce.CompareAndSwap(false, true) {
		return nil // never started, or stopped
	}
	// The appender and the Reaper stay set: the trickler's goroutine
	// may still look at the appender's next flush on its way out.
	err := r.app.Close()
	releaseReaper()
	return err
}

// endAll kills every child (status killed, reason) and waits until each
// one's end is stored. A database locked by another process must not keep
// those ends waiting for their spooled output.
func (r *runners) endAll(reason string) {
	r.mu.Lock()
	kids := make([]*child, 0, len(r.children))
	for _, c := range r.children {
		kids = append(kids, c)
	}
	r.mu.Unlock()
	if r.app != nil {
		r.app.StopWaiting()
	}
	var kills sync.WaitGroup
	for _, c := range kids {
		kills.Add(1)
		go func() {
			defer kills.Done()
			if _, err := r.endChild(context.Background(), c, vocab.StatusKilled, reason, r.s.cfg.Grace); err != nil {
				r.s.logf("kill job %s: %v", c.id, err)
			}
		}()
	}
	kills.Wait()
}

// register adds a placeholder child for a job about to be created, so that
// a kill or Close arriving meanwhile finds it, and counts its runner in wg.
func (r *runners) register(id string, baseEnv []string) (*child, error) {
	c := newChild(id, baseEnv)
	if err := r.s.admit(func() {
		r.mu.Lock()
		r.children[id] = c
		r.mu.Unlock()
		r.wg.Add(1)
	}); err != nil {
		return nil, err
	}
	r.s.poke()
	return c, nil
}

// complete records the child's final job, forgets it and wakes whoever
// waits for it. The caller still owes the wg.Done for the child.
func (r *runners) complete(c *child, final db.Job) {
	c.mu.Lock()
	c.final = final
	c.mu.Unlock()
	r.mu.Lock()
	delete(r.children, c.id)
	if len(r.children) == 0 {
		r.idleSince = timeNow()
	}
	r.mu.Unlock()
	r.s.poke()
	r.s.queue.kick() // a place in a queue or under a cap may be free now
	c.readyOnce.Do(func() { close(c.ready) })
	close(c.done)
}

// drop completes a registered child whose runner never started.
func (r *runners) drop(c *child, final db.Job) {
	r.complete(c, final)
	r.wg.Done()
}

// idle returns how many children run and since when none has.
func (r *runners) idle() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.children), r.idleSince
}

// running returns the ids of the children.
func (r *runners) running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.children))
	for id := range r.children {
		ids = append(ids, id)
	}
	return ids
}

// checkpointSoon nudges the appender's checkpointer.
func (r *runners) checkpointSoon() {
	if r.app != nil {
		r.app.CheckpointSoon()
	}
}

// flush returns once every output byte read so far is in the database.
func (r *runners) flush(ctx context.Context) error {
	if r.app == nil {
		return nil
	}
	return r.app.Flush(ctx)
}

// noteDropped is the appender's OnDropped callback. It only counts: the
// database just failed, so the event is written later by the job's runner.
func (r *runners) noteDropped(jobID string, n int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.dropped[jobID]
	if d == nil {
		d = &dropNote{}
		r.dropped[jobID] = d
	}
	d.bytes += n
	if err != nil {
		d.err = err.Error()
	}
}

// takeDropped returns and forgets what was dropped of jobID.
func (r *runners) takeDropped(jobID string) *dropNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.dropped[jobID]
	delete(r.dropped, jobID)
	return d
}

// child returns the live child of jobID, or nil.
func (r *runners) child(jobID string) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.children[jobID]
}

// jobCgroup makes the cgroup of job id under the supervisor's own, or
// returns nil where the system offers none (no cgroup v2, or not
// writable: see proc.NewCgroup) or an earlier start found it refused.
func (r *runners) jobCgroup(id string) *proc.Cgroup {
	if r.noCgroup.Load() {
		return nil
	}
	cg, err := proc.NewCgroup("jobs-" + id)
	if err != nil {
		r.noCgroup.Store(true)
		return nil
	}
	return cg
}

// startChild starts cmd with an empty signal mask and default
// dispositions, whatever this process inherited (see package sigreset).
// StartCmd owns the pid in the reaper in the same step, so the
// subreaper's orphan reaping never takes the status cmd.Wait needs.
func (r *runners) startChild(cmd *exec.Cmd) error {
	started, err := sigreset.Wrap(cmd)
	if err != nil {
		return err
	}
	err = r.reaper.StartCmd(cmd)
	if serr := started(); err == nil && serr != nil {
		cmd.Wait()
		r.reaper.Disown(cmd.Process.Pid)
		err = serr
	}
	return err
}

// reserveForEnd readies the database for recording a job's end: on a
// tight disk, it copies and truncates the WAL and lets one end be recorded
// at a time, so that each finds the whole reserve (db.Upkeep). It
// returns the function that lets the next one go.
func (r *runners) reserveForEnd() func() {
	r.endMu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), db.FinalWriteTimeout)
	defer cancel()
	if r.app.Reclaim(ctx) {
		return r.endMu.Unlock
	}
	r.endMu.Unlock()
	return func() {}
}

// persist runs a write that must land — a final status, the record of
// dropped output — until it succeeds. A database locked past its busy
// timeout (a long transaction elsewhere, a full disk being cleaned up) must
// not leave a finished job "running" forever, so failures are retried with
// backoff; errors that retrying cannot fix end it at once, and once the
// supervisor is closing one more attempt is all it gets. Each attempt is
// bounded and runs without the supervisor's cancellation.
func (r *runners) persist(what string, write func(ctx context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), db.FinalWriteTimeout)
		err := write(ctx)
		cancel()
		if err == nil || errors.Is(err, vocab.ErrInvalidTransition) || errors.Is(err, vocab.ErrNotFound) || r.Context().Err() != nil {
			return err
		}
		r.s.logf("%s: %v (retrying in %s)", what, err, backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
