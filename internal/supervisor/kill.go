package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Kill ends the job's whole process tree: SIGTERM and SIGCONT to its group
// and its tagged processes, grace (0 means Config.Grace, vocab.NoGrace
// none), SIGKILL. It
// returns once the job's final status (killed) is stored. A job of another
// live supervisor is killed through that supervisor; a job whose supervisor
// died is marked lost and its remaining processes are ended. Killing a
// finished job is not an error (AlreadyDone), and still ends what it left
// running. Errors: vocab.ErrNotFound, vocab.ErrInvalid.
func (s *Supervisor) Kill(ctx context.Context, jobID string, grace time.Duration) (vocab.KillResult, error) {
	grace, err := control.Grace(grace, s.cfg.Grace)
	if err != nil {
		return vocab.KillResult{}, fmt.Errorf("kill job %s: %w", jobID, err)
	}
	if c := s.runners.child(jobID); c != nil {
		res, err := s.runners.endChild(ctx, c, vocab.StatusKilled, "killed", grace)
		if err != nil {
			return res, fmt.Errorf("kill job %s: %w", jobID, err)
		}
		return res, nil
	}
	job, err := s.db.FindJobByID(ctx, jobID)
	if err != nil {
		return vocab.KillResult{}, fmt.Errorf("kill job %s: %w", jobID, err)
	}
	if res, done, err := control.KillQueued(ctx, s.db, job); done {
		s.queue.takeEnv(job.ID) // it never starts: its kept environment goes
		return res, err
	} else if job.Status == vocab.StatusQueued {
		// Its turn came meanwhile: kill it as a job with a process.
		return s.Kill(ctx, jobID, grace)
	}
	if job.Mode == vocab.ModeTmux {
		return tmuxjob.Kill(ctx, s.db, job, grace, s.logf) // needs no owner
	}
	if !job.Status.Terminal() {
		conn, err := s.owner(ctx, job)
		if err != nil {
			return vocab.KillResult{}, fmt.Errorf("kill job %s: %w", jobID, err)
		}
		if conn != nil {
			defer conn.Close()
			asked := grace
			if asked == 0 {
				asked = vocab.NoGrace
			}
			res, err := conn.Kill(ctx, jobID, asked)
			if errors.Is(err, protocol.ErrHung) {
				res, err = control.Unanswered(ctx, s.db, job, grace, "supervisor "+job.SupervisorID)
			}
			return res, err
		}
		if job, err = s.markLost(ctx, job); err != nil {
			return vocab.KillResult{}, fmt.Errorf("kill job %s: %w", jobID, err)
		}
	}
	res, err := control.Leftovers(ctx, s.db, job, grace)
	if err != nil {
		return res, fmt.Errorf("kill job %s: %w", jobID, err)
	}
	return res, nil
}

// owner dials the live supervisor, other than s, that owns the active job,
// or returns nil when that supervisor is dead.
func (s *Supervisor) owner(ctx context.Context, job db.Job) (*protocol.Conn, error) {
	if job.SupervisorID == "" || job.SupervisorID == s.id {
		return nil, nil
	}
	sup, err := s.db.FindSupervisor(ctx, job.SupervisorID)
	if errors.Is(err, vocab.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !protocol.SupervisorAlive(sup) {
		return nil, nil
	}
	conn, err := protocol.Dial(ctx, sup.SocketPath)
	if err != nil {
		return nil, fmt.Errorf("reach supervisor %s: %w", sup.ID, err)
	}
	return conn, nil
}

// markLost marks an active job whose supervisor is gone lost, and returns
// it as stored. A job that finished meanwhile is returned as it is.
func (s *Supervisor) markLost(ctx context.Context, job db.Job) (db.Job, error) {
	reason := fmt.Sprintf("supervisor %s died", job.SupervisorID)
	if job.SupervisorID == s.id {
		reason = fmt.Sprintf("supervisor %s lost track of it", s.id)
	}
	lost, err := s.db.Transition(ctx, job.ID, sweep.LostTransition(ctx, s.db, job, reason))
	if errors.Is(err, vocab.ErrInvalidTransition) {
		return s.db.FindJobByID(ctx, job.ID)
	}
	if err != nil {
		return job, err
	}
	s.hooks.hookLost(lost)
	return lost, nil
}

// signalEnd records why c ends (status, reason) and kills its tree. It
// does not wait for the final status; the runner stores it.
func (r *runners) signalEnd(ctx context.Context, c *child, status vocab.Status, reason string, grace time.Duration) (vocab.KillResult, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return vocab.KillResult{JobID: c.id}, ctx.Err()
	}
	recorded := c.setEnd(status, reason, false)
	c.mu.Lock()
	started, exited := c.cmd != nil, c.exited
	c.mu.Unlock()
	res := vocab.KillResult{JobID: c.id, AlreadyDone: exited || !started, Signalled: []int{}, Survivors: []int{}}
	if !started {
		return res, nil
	}
	t := c.target()
	control.Guard(ctx, r.s.db, &t)
	// The kill must finish its escalation even if the caller goes away.
	kr, err := control.End(context.WithoutCancel(ctx), t, grace)
	res.Signalled, res.Survivors, res.Escalated = kr.Signalled, kr.Survivors, kr.Escalated
	if recorded {
		res.AlreadyDone = false
	}
	return res, err
}

// endChild kills c and waits until its final status is stored.
func (r *runners) endChild(ctx context.Context, c *child, status vocab.Status, reason string, grace time.Duration) (vocab.KillResult, error) {
	res, err := r.signalEnd(ctx, c, status, reason, grace)
	if err != nil && ctx.Err() != nil {
		return res, err
	}
	// The runner finishes within the pipe drain and the final write once
	// the processes are gone; the bound only guards against a bug.
	bound := time.NewTimer(r.s.cfg.DrainTimeout + db.FinalWriteTimeout + proc.KillWait)
	defer bound.Stop()
	select {
	case <-c.done:
	case <-ctx.Done():
		return res, ctx.Err()
	case <-bound.C:
		return res, fmt.Errorf("job %s did not finish after kill", c.id)
	}
	c.mu.Lock()
	res.Status = c.final.Status
	c.mu.Unlock()
	return res, err
}

// Signal sends one signal (a name such as "INT", "STOP", "CONT", or a
// number) to the job's processes and returns the pids signalled. STOP and
// CONT pause and resume a job. Errors: vocab.ErrNotFound, vocab.ErrNotRunning,
// vocab.ErrInvalid for an unknown signal.
func (s *Supervisor) Signal(ctx context.Context, jobID string, sig string) ([]int, error) {
	sn, err := vocab.ParseSignal(sig)
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", jobID, invalid(err))
	}
	if c := s.runners.child(jobID); c != nil {
		select {
		case <-c.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		running := c.cmd != nil && !c.exited
		c.mu.Unlock()
		if !running {
			return nil, fmt.Errorf("signal job %s: %w", jobID, vocab.ErrNotRunning)
		}
		t := c.target()
		control.Guard(ctx, s.db, &t)
		pids, err := control.Send(t, sn)
		if err != nil {
			return pids, fmt.Errorf("signal job %s: %w", jobID, err)
		}
		return pids, nil
	}
	job, err := s.db.FindJobByID(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", jobID, err)
	}
	if job.Mode == vocab.ModeTmux {
		return tmuxjob.Signal(ctx, s.db, job, sig) // needs no owner: tmux.go
	}
	if !job.Status.Terminal() {
		conn, err := s.owner(ctx, job)
		if err != nil {
			return nil, fmt.Errorf("signal job %s: %w", jobID, err)
		}
		if conn != nil {
			defer conn.Close()
			pids, err := conn.Signal(ctx, jobID, sig)
			if errors.Is(err, protocol.ErrHung) {
				return control.Send(control.Target(ctx, s.db, job), sn)
			}
			return pids, err
		}
		if job, err = s.markLost(ctx, job); err != nil {
			return nil, fmt.Errorf("signal job %s: %w", jobID, err)
		}
	}
	if job.Status != vocab.StatusLost {
		return nil, fmt.Errorf("signal job %s: %w", jobID, vocab.ErrNotRunning)
	}
	// A lost job's processes that still run are signalled as a kill
	// would end them.
	pids, err := control.Send(control.Target(ctx, s.db, job), sn)
	if err != nil {
		return pids, fmt.Errorf("signal job %s: %w", jobID, err)
	}
	return pids, nil
}

// Running returns the ids of the jobs this supervisor is running, sorted.
func (s *Supervisor) Running() []string {
	ids := s.runners.running()
	slices.Sort(ids)
	return ids
}
