package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// timeNow is the clock for durations the supervisor measures itself.
var timeNow = time.Now

// child is one job's live process, shared by its runner goroutine and the
// verbs (kill, write, signal) that act on it.
type child struct {
	id      string
	baseEnv []string // for the on-exit hook
	// timeoutGrace is SIGTERM to SIGKILL when the timeout ends the job.
	timeoutGrace time.Duration

	ready     chan struct{} // closed once Start is done with the process (running or not)
	readyOnce sync.Once
	done      chan struct{} // closed once the final status is stored

	// stdinTurn serialises writers: a one-slot semaphore rather than a
	// mutex, so that a writer waiting behind a blocked one gives up with
	// its own deadline.
	stdinTurn chan struct{}

	mu    sync.Mutex
	job   db.Job // as created, then as running; read after ready
	cmd   *exec.Cmd
	stdin *os.File // write end; nil for /dev/null or once closed
	// outputs are its stdout and, unless it has one stream (pty, merge),
	// its stderr, as its pumps read them; pair keeps their order. Both
	// are the job's from its start, before its runner runs (openOutputs).
	outputs  []*jobOutput
	pair     *pipePair
	pty      bool
	pid      int
	pidStart int64
	cgroup   string       // the job's own cgroup, or ""
	exited   bool         // the main process has exited
	end      vocab.Status // set by kill, timeout or Close before they signal
	reason   string
	final    db.Job
	spawned  time.Time // when the runner goroutine took the process over
	// spawnerPeakKB is the supervisor's peak RSS once the child had
	// exec'd: the child's reported peak includes it (proc.SpawnerPeakKB).
	spawnerPeakKB int64
}

func newChild(id string, baseEnv []string) *child {
	return &child{
		id:        id,
		baseEnv:   baseEnv,
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
		stdinTurn: make(chan struct{}, 1),
	}
}

// target names the job's processes for package proc: its group, its main
// process with its start time, and everything tagged with its JOBS_ID.
func (c *child) target() proc.Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return proc.Target{
		PGID: c.pid, PID: c.pid, PIDStart: c.pidStart, BootID: proc.BootID(),
		EnvKey: protocol.EnvJobID, EnvValue: c.id, NotEnvKey: protocol.EnvHookOf, Cgroup: c.cgroup,
	}
}

// setEnd records why the job is about to end, unless a reason is already
// recorded or (without force) the main process has already exited on its
// own. It reports whether it recorded status.
func (c *child) setEnd(status vocab.Status, reason string, force bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != "" || (c.exited && !force) {
		return false
	}
	c.end, c.reason = status, reason
	return true
}

// run is the runner goroutine of one child: it pumps the pipes into the
// appender, enforces the timeout, waits for the main process, drains the
// pipes with a bound, stores the final status and runs the exit hooks. It
// owns the pump and wait goroutines and waits for both.
func (r *runners) run(c *child, timeout, grace time.Duration) {
	defer r.wg.Done()
	c.mu.Lock()
	cmd, outputs, pid := c.cmd, c.outputs, c.pid
	// The runtime is measured from here with the monotonic clock: the
	// process was spawned just before this goroutine started.
	c.spawned = time.Now()
	c.mu.Unlock()

	if r.holdPumps != nil {
		<-r.holdPumps
	}
	var pumps sync.WaitGroup
	var drain pipeDrain
	for _, o := range outputs {
		pumps.Go(func() { r.pump(o, &drain) })
	}
	waited := make(chan error, 1)
	go func() {
		awaitExit(pid)
		waited <- cmd.Wait()
	}()

	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-waited:
			break wait
		case <-expired:
			expired = nil
			<-c.ready
			reason := fmt.Sprintf("timed out after %s", timeout)
			if _, err := r.signalEnd(context.Background(), c, vocab.StatusTimedOut, reason, grace); err != nil {
				r.s.logf("time out job %s: %v", c.id, err)
			}
		}
	}
	r.reaper.Disown(pid)

	c.mu.Lock()
	c.exited = true
	end, reason := c.end, c.reason
	stdin := c.stdin
	c.stdin = nil
	c.mu.Unlock()
	if stdin != nil {
		// Closing unblocks a writer stuck on a full pipe that a
		// surviving grandchild holds but does not read.
		stdin.Close()
	}

	// The job is finished when its main process has exited and its pipes
	// are drained. A grandchild that inherited the pipes (`sleep 999 &`)
	// would hold them open forever, so the drain is bounded, as
	// exec.Cmd.WaitDelay bounds Wait; what the grandchild writes after
	// that is not captured. The pumps close the pipes.
	drain.set(timeNow().Add(r.s.cfg.DrainTimeout))
	r.trickle.readNow()
	pumps.Wait()

	<-c.ready
	job := r.finish(c, cmd.ProcessState, waitErr, end, reason)
	// An empty cgroup goes with the job; one that processes the job
	// left behind still hold stays, so that a kill finds them.
	_ = proc.RemoveCgroup(c.cgroup)
	r.s.hooks.afterExit(job, c.baseEnv)
}

// finish stores the job's final status. The output goes in first, so that
// whoever sees the job finished can read all of it.
func (r *runners) finish(c *child, ps *os.ProcessState, waitErr error, end vocab.Status, reason string) db.Job {
	c.mu.Lock()
	started := c.job.Status == vocab.StatusRunning
	scope := c.job.Scope
	spawned, spawnerPeak := c.spawned, c.spawnerPeakKB
	c.mu.Unlock()

	if end == "" && ps != nil && !ps.Success() {
		// Ended from outside while this supervisor did not answer (a
		// kill that found it stopped records its intent and ends the
		// processes itself: control.Unanswered).
		ctx, cancel := context.WithTimeout(context.Background(), db.FinalWriteTimeout)
		if stop, err := r.s.db.StopRequested(ctx, c.id); err == nil && stop != "" {
			end, reason = stop, "killed while its supervisor did not answer"
			if stop == vocab.StatusTimedOut {
				reason = "timed out while its supervisor did not answer"
			}
		}
		cancel()
	}
	var t db.Transition
	if ps != nil {
		code, sig := proc.ExitStatus(ps)
		t.ExitCode, t.Signal = &code, sig
		u := proc.UsageOf(ps)
		if u.MaxRSSKB <= spawnerPeak {
			// Not above what the kernel took over from us at the
			// exec: the job's own peak is somewhere below, unknown.
			u.MaxRSSKB = 0
		}
		t.Usage = &db.Usage{UserCPU: u.UserCPU, SysCPU: u.SysCPU, MaxRSSKB: u.MaxRSSKB}
	}
	switch {
	case end != "":
		t.To, t.Reason = end, reason
	case ps == nil:
		t.To, t.Reason = vocab.StatusFailed, fmt.Sprintf("wait: %v", waitErr)
	case *t.ExitCode == 0:
		t.To = vocab.StatusDone
	default:
		t.To = vocab.StatusFailed
		switch {
		case strings.HasPrefix(t.Signal, "SIG"):
			t.Reason = "killed by " + t.Signal
		case t.Signal != "": // a real-time signal, which has only a number
			t.Reason = "killed by signal " + t.Signal
		}
	}
	if !started && t.To != vocab.StatusFailed && t.To != vocab.StatusKilled {
		// Still starting in the database (its running transition did not
		// land): only these moves are allowed from there.
		t.To = vocab.StatusFailed
	}

	if !spawned.IsZero() {
		t.Runtime = time.Since(spawned)
	}
	// The pipes are drained: the appender's counts are final. Recorded
	// with the status, they survive a database that refused the last
	// batches (and their counter updates).
	totals, tracked := r.app.Totals(c.id)
	// Untrack flushes; bytes the database refused are counted by then
	// (OnDropped runs inside the flush that gives up on them).
	if err := r.app.Untrack(c.id); err != nil {
		r.s.logf("flush output of job %s: %v", c.id, err)
	}
	release := r.reserveForEnd()
	d := r.takeDropped(c.id)
	if tracked {
		t.Output = &db.OutputTotals{Bytes: totals.Bytes, Lines: totals.Lines}
		if d != nil {
			t.Output.Dropped = d.bytes
		}
	}
	if d != nil && d.bytes > 0 {
		t.Detail = map[string]any{"dropped_bytes": d.bytes}
		detail, _ := json.Marshal(map[string]any{"bytes": d.bytes, "error": d.err})
		if err := r.persist("record dropped output of job "+c.id, func(ctx context.Context) error {
			_, err := r.s.db.AddEvent(ctx, db.Event{JobID: c.id, Scope: scope, Kind: "output_dropped", Detail: detail})
			return err
		}); err != nil {
			r.s.logf("record dropped output of job %s: %v", c.id, err)
		}
	}
	var job db.Job
	err := r.persist("record end of job "+c.id, func(ctx context.Context) (err error) {
		job, err = r.s.db.Transition(ctx, c.id, t)
		return err
	})
	if err != nil {
		r.s.logf("record end of job %s: %v", c.id, err)
		ctx, cancel := context.WithTimeout(context.Background(), db.FinalWriteTimeout)
		defer cancel()
		if j, ferr := r.s.db.FindJobByID(ctx, c.id); ferr == nil {
			job = j
		} else {
			c.mu.Lock()
			job = c.job
			c.mu.Unlock()
			job.Status, job.ExitCode, job.Signal, job.Reason = t.To, t.ExitCode, t.Signal, t.Reason
		}
	}
	release()
	r.complete(c, job)
	return job
}
