package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// controller is what acts on a live child: the in-process supervisor or a
// socket to the supervisor that owns the job.
type controller interface {
	Write(ctx context.Context, jobID string, data []byte, eof bool, idle time.Duration) (int, error)
	Kill(ctx context.Context, jobID string, grace time.Duration) (vocab.KillResult, error)
	Signal(ctx context.Context, jobID string, sig string) ([]int, error)
}

// controllerFor finds the live supervisor of j. It returns nil when that
// supervisor is gone (the job is then lost, or about to be marked so).
func (c *Client) controllerFor(ctx context.Context, j db.Job) (controller, func(), error) {
	if c.sup != nil && j.SupervisorID == c.sup.ID() {
		return c.sup, func() {}, nil
	}
	if j.SupervisorID == "" {
		return nil, func() {}, nil
	}
	s, err := c.db.FindSupervisor(ctx, j.SupervisorID)
	if err != nil {
		if errors.Is(err, vocab.ErrNotFound) {
			return nil, func() {}, nil
		}
		return nil, nil, err
	}
	if s.EndedAt != nil || !protocol.SupervisorAlive(s) {
		return nil, func() {}, nil
	}
	conn, err := protocol.Dial(ctx, s.SocketPath)
	if err != nil {
		return nil, func() {}, nil
	}
	return conn, func() { conn.Close() }, nil
}

// Write writes data to the job's stdin and returns how many bytes the job
// took. When the job takes none of the rest for the client's WriteTimeout
// (10 s by default), Write gives up with an error wrapping ErrNotReading;
// the count says what went in before. Other errors: ErrNotFound,
// ErrNotRunning, ErrStdinClosed.
func (c *Client) Write(ctx context.Context, ref string, data []byte) (int, error) {
	return c.write(ctx, ref, data, false)
}

// CloseStdin closes the job's stdin (end of file for the job). It does not
// wait for the job to read: it works even while a Write is blocked (that
// Write then fails with ErrStdinClosed).
func (c *Client) CloseStdin(ctx context.Context, ref string) error {
	_, err := c.write(ctx, ref, nil, true)
	return err
}

func (c *Client) write(ctx context.Context, ref string, data []byte, eof bool) (int, error) {
	if err := c.check(ctx); err != nil {
		return 0, err
	}
	if err := c.writable(); err != nil {
		return 0, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return 0, err
	}
	if j.Status.Terminal() {
		return 0, fmt.Errorf("job %s is %w (%s)", echo(ref), ErrNotRunning, j.Status)
	}
	if j.Mode == vocab.ModeTmux {
		// tmux types into the pane itself: no supervisor needed.
		if eof {
			return 0, publicErr(ref, tmuxjob.SendKeys(j, []string{"C-d"}, false))
		}
		if err := tmuxjob.SendKeys(j, []string{string(data)}, true); err != nil {
			return 0, publicErr(ref, err)
		}
		return len(data), nil
	}
	if j.Stdin != vocab.StdinPipe {
		return 0, fmt.Errorf("job %s: %w", echo(ref), ErrStdinClosed)
	}
	ctl, done, err := c.controllerFor(ctx, j)
	if err != nil {
		return 0, err
	}
	defer done()
	if ctl == nil {
		return 0, fmt.Errorf("job %s is %w (its supervisor is gone)", echo(ref), ErrNotRunning)
	}
	n, err := ctl.Write(ctx, j.ID, data, eof, c.opts.WriteTimeout)
	if errors.Is(err, protocol.ErrHung) {
		return 0, fmt.Errorf("job %s: its %w (%s: stopped or hung, no answer to a ping within 2s): nothing was written", echo(ref), protocol.ErrHung, j.SupervisorID)
	}
	if errors.Is(err, vocab.ErrNotReading) {
		return n, &NotReadingError{Ref: echo(ref), Took: n, Size: len(data), Idle: c.opts.WriteTimeout}
	}
	return n, publicErr(ref, err)
}

// Kill ends the job's whole process tree: SIGTERM, grace (0 means the
// client's default, NoGrace none; any other negative grace is ErrInvalid),
// SIGKILL. Killing a finished job is not an error (AlreadyDone); what a
// finished or lost job left running is ended too. When the job's
// supervisor is alive but does not answer, Kill ends the job's processes
// itself and says so in the result's Unreached. Everything goes through
// the one control path (internal/control, docs/kill.md).
func (c *Client) Kill(ctx context.Context, ref string, grace time.Duration) (KillResult, error) {
	if err := c.check(ctx); err != nil {
		return KillResult{}, err
	}
	if err := c.writable(); err != nil {
		return KillResult{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return KillResult{}, err
	}
	return c.kill(ctx, j, grace)
}

func (c *Client) kill(ctx context.Context, j db.Job, grace time.Duration) (KillResult, error) {
	wait, err := control.Grace(grace, c.opts.Grace)
	if err != nil {
		return KillResult{}, fmt.Errorf("kill job %s: %w", echo(j.ID), err)
	}
	if r, done, err := control.KillQueued(ctx, c.db, j); done {
		// No process yet: the kill is a move in the database.
		return r, publicErr(j.ID, err)
	} else if j.Status == StatusQueued {
		if cur, err := c.db.FindJobByID(ctx, j.ID); err == nil {
			j = cur // its turn came meanwhile
		}
	}
	if j.Mode == vocab.ModeTmux {
		// Any process can end a tmux job: it records the stop first, so
		// whoever records the exit says killed.
		r, err := tmuxjob.Kill(ctx, c.db, j, wait, nil)
		if err != nil {
			return KillResult{}, publicErr(j.ID, err)
		}
		return r, nil
	}
	if !j.Status.Terminal() {
		ctl, done, err := c.controllerFor(ctx, j)
		if err != nil {
			return KillResult{}, err
		}
		defer done()
		if ctl != nil {
			// The owner normalises again with its own default; what
			// was decided here goes as it is.
			asked := wait
			if asked == 0 {
				asked = NoGrace
			}
			r, err := ctl.Kill(ctx, j.ID, asked)
			if errors.Is(err, protocol.ErrHung) {
				r, err = control.Unanswered(ctx, c.db, j, wait, "supervisor "+j.SupervisorID)
				return r, publicErr(j.ID, err)
			}
			if err != nil {
				return KillResult{}, publicErr(j.ID, err)
			}
			return r, nil
		}
		_, _ = c.noticeLost(ctx)
		if cur, err := c.db.FindJobByID(ctx, j.ID); err == nil {
			j = cur
		}
	}
	if !j.Status.Terminal() {
		// Its supervisor is alive (its lock is held) but its socket
		// cannot be reached.
		r, err := control.Unanswered(ctx, c.db, j, wait, "supervisor "+j.SupervisorID)
		return r, publicErr(j.ID, err)
	}
	// Finished or lost: end whatever of it still runs and is proven its
	// own, so a reused pid or group is never hit.
	r, err := control.Leftovers(ctx, c.db, j, wait)
	return r, publicErr(j.ID, err)
}

// KillSignal is Kill with a signal, as the kill verbs of every front end
// take it (by name with or without SIG, in any case, or by number): none,
// TERM and KILL end the job (KILL with no grace period, still recorded
// killed); any other signal is sent once, and the result then names it
// (Signal) and lists the pids it reached. A grace period with such a
// signal, or an unknown signal, is ErrInvalid.
func (c *Client) KillSignal(ctx context.Context, ref, sig string, grace time.Duration) (KillResult, error) {
	p, err := control.PlanKill(sig, grace)
	if err != nil {
		return KillResult{}, err
	}
	if p.End {
		return c.Kill(ctx, ref, p.Grace)
	}
	pids, err := c.Signal(ctx, ref, p.SignalName)
	if err != nil {
		return KillResult{}, err
	}
	r := KillResult{JobID: ref, Signal: p.SignalName, Signalled: pids, Survivors: []int{}}
	if j, err := c.find(ctx, ref); err == nil {
		r.JobID, r.Status = j.ID, j.Status
	}
	return r, nil
}

func nonNil(p []int) []int {
	if p == nil {
		return []int{}
	}
	return p
}

// KillAll kills every running job of the scope, for an agent closing its
// session.
func (c *Client) KillAll(ctx context.Context, grace time.Duration) ([]KillResult, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if err := c.writable(); err != nil {
		return nil, err
	}
	_, _ = c.noticeLost(ctx)
	rows, err := c.db.FindJobs(ctx, db.Filter{Scope: c.opts.Scope, Statuses: []vocab.Status{vocab.StatusQueued, vocab.StatusStarting, vocab.StatusRunning}})
	if err != nil {
		return nil, err
	}
	out := make([]KillResult, len(rows))
	errs := make([]error, len(rows))
	done := make(chan int)
	for i, j := range rows {
		go func() {
			out[i], errs[i] = c.kill(ctx, j, grace)
			done <- i
		}()
	}
	for range rows {
		<-done
	}
	return out, errors.Join(errs...)
}

// Signal sends one signal (a name such as "INT", "STOP", "CONT") to the
// job's processes and returns the pids signalled.
func (c *Client) Signal(ctx context.Context, ref string, sig string) ([]int, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if err := c.writable(); err != nil {
		return nil, err
	}
	s, err := vocab.ParseSignal(sig)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	if j.Status.Terminal() {
		if j.Status != vocab.StatusLost {
			return nil, fmt.Errorf("job %s is %w (%s)", echo(ref), ErrNotRunning, j.Status)
		}
		return control.Send(control.Target(ctx, c.db, j), s)
	}
	ctl, done, err := c.controllerFor(ctx, j)
	if err != nil {
		return nil, err
	}
	defer done()
	if ctl == nil {
		return control.Send(control.Target(ctx, c.db, j), s)
	}
	pids, err := ctl.Signal(ctx, j.ID, vocab.SignalName(s))
	if errors.Is(err, protocol.ErrHung) {
		// Its supervisor does not answer: the signal goes to what is
		// proven the job's, as for a lost job.
		return control.Send(control.Target(ctx, c.db, j), s)
	}
	return nonNil(pids), publicErr(ref, err)
}

// Pause stops the job's processes (SIGSTOP to its process group and its
// tagged processes) and returns the pids stopped. The job keeps its status
// and reads report it Stopped; Resume continues it. A timeout or kill still
// ends a paused job: kill sends SIGCONT after SIGTERM.
// Each pause leaves a note on the job's events.
func (c *Client) Pause(ctx context.Context, ref string) ([]int, error) {
	return c.signalNoted(ctx, ref, "STOP", "paused")
}

// Resume continues a paused job (SIGCONT) and returns the pids continued.
// Each resume leaves a note on the job's events.
func (c *Client) Resume(ctx context.Context, ref string) ([]int, error) {
	return c.signalNoted(ctx, ref, "CONT", "resumed")
}

// signalNoted is Signal, then a note on the audit trail: a pause is no
// status transition, yet an audit must be able to tell why a job sat
// still. A note that cannot be written fails the call after the signal
// was sent, so the caller knows the trail is short.
func (c *Client) signalNoted(ctx context.Context, ref, sig, message string) ([]int, error) {
	pids, err := c.Signal(ctx, ref, sig)
	if err != nil {
		return pids, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return pids, err
	}
	detail, err := json.Marshal(map[string]any{"message": message, "pids": len(pids)})
	if err != nil {
		return pids, err
	}
	if _, err := c.db.AddEvent(context.WithoutCancel(ctx), db.Event{JobID: j.ID, Scope: j.Scope, Kind: "note", Detail: detail}); err != nil {
		return pids, fmt.Errorf("record %s: %w", message, err)
	}
	return pids, nil
}

// Clear drops a job's stored output. Offsets stay absolute: what was
// cleared counts as evicted.
func (c *Client) Clear(ctx context.Context, ref string) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
		return err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return err
	}
	return logs.Clear(ctx, c.db, j.ID)
}

// Remove deletes a job, killing it first if it runs. Its events stay.
func (c *Client) Remove(ctx context.Context, ref string) (KillResult, error) {
	if err := c.check(ctx); err != nil {
		return KillResult{}, err
	}
	if err := c.writable(); err != nil {
		return KillResult{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return KillResult{}, err
	}
	r := KillResult{JobID: j.ID, Status: j.Status, AlreadyDone: true, Signalled: []int{}, Survivors: []int{}}
	if !j.Status.Terminal() {
		if r, err = c.kill(ctx, j, 0); err != nil {
			return r, err
		}
		// The runner records the final status after draining; wait for it
		// so the row is not deleted under it.
		c.waitTerminal(ctx, j.ID, 10*time.Second)
	}
	if err := c.db.DeleteJob(ctx, j.ID); err != nil {
		return r, publicErr(ref, err)
	}
	// Its cgroup goes with it once nothing is left in it.
	control.ForgetCgroup(ctx, c.db, j.ID)
	return r, nil
}

// waitTerminal waits, bounded, until the job has a terminal status.
func (c *Client) waitTerminal(ctx context.Context, id string, bound time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	w := newWatcher(c.db.Path)
	w.watchStatus()
	defer w.Close()
	for {
		j, err := c.db.FindJobByID(ctx, id)
		if err != nil || j.Status.Terminal() {
			return
		}
		if w.Wait(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// GCResult says what a garbage collection removed.
type GCResult struct {
	Lost   int   `json:"jobs_lost"`
	Jobs   int   `json:"jobs_deleted"`
	Events int64 `json:"events_deleted"`
}

// VacuumResult is the database's size on disk (file and WAL) before and
// after Vacuum.
type VacuumResult struct {
	Before int64 `json:"size_before"`
	After  int64 `json:"size_after"`
}

// Vacuum rewrites the database compactly and turns on incremental
// auto-vacuum, with which the janitor gives the space of deleted jobs back
// to the file system. Databases created by this version have it already;
// Vacuum is for older ones. Writers wait while it runs, and it needs free
// disk space about the size of the database.
func (c *Client) Vacuum(ctx context.Context) (VacuumResult, error) {
	if err := c.check(ctx); err != nil {
		return VacuumResult{}, err
	}
	r := VacuumResult{Before: c.db.Size()}
	if err := c.db.Vacuum(ctx); err != nil {
		return r, err
	}
	r.After = c.db.Size()
	return r, nil
}

// GC runs the janitor now: marks jobs of dead supervisors lost, deletes
// finished jobs past their TTL and events past retention (30 days). It works
// on the whole database, not only the client's scope. Like a read it starts
// nothing: the exit hooks of the jobs it marks lost are run by the next
// supervisor.
func (c *Client) GC(ctx context.Context) (GCResult, error) {
	if err := c.check(ctx); err != nil {
		return GCResult{}, err
	}
	if err := c.writable(); err != nil {
		return GCResult{}, err
	}
	r, err := sweep.Run(ctx, c.db, 0)
	return GCResult{Lost: r.Lost, Jobs: r.Deleted, Events: r.EventsDeleted}, err
}
