package supervisor

import (
	"context"
	"sync/atomic"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/hook"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/vocab"
)

// hooks is the service that runs on-exit work: Config.OnExit and the
// on_exit commands (hook.Runner) of the supervisor's own jobs, run by
// their runners; and, in goroutines of its own, the hooks of jobs it did
// not see end (lost, or due since a supervisor died: runDueHooks).
type hooks struct {
	startstop.Base
	s        *Supervisor
	runner   hook.Runner
	stopOnce atomic.Bool // set by the Stop that releases the Reaper
}

// Start readies the hook runner, with the process's shared Reaper.
func (h *hooks) Start(ctx context.Context) error {
	h.Init(ctx)
	s := h.s
	h.runner = hook.Runner{DB: s.db, Timeout: s.cfg.HookTimeout, Reaper: acquireReaper(s.cfg.Logf), Logf: s.cfg.Logf}
	return nil
}

// Stop waits for the hooks under way and releases the Reaper.
func (h *hooks) Stop() error {
	h.Halt()
	if h.runner.Reaper != nil && h.stopOnce.CompareAndSwap(false, true) {
		releaseReaper()
	}
	return nil
}

// afterExit runs what waits for a job's end: Config.OnExit and the job's
// on_exit command. Neither can change the job.
func (h *hooks) afterExit(job db.Job, baseEnv []string) {
	s := h.s
	if s.cfg.OnExit != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.logf("on-exit callback for job %s panicked: %v", job.ID, r)
				}
			}()
			s.cfg.OnExit(job)
		}()
	}
	if job.OnExit != "" {
		h.runHook(job, baseEnv)
	}
}

// runHook runs the job's on_exit command (hook.Runner), bounded by
// HookTimeout. A hook runs once per job whoever notices the job's end: the
// claim in the database decides between this supervisor and any other
// that found the same lost job.
func (h *hooks) runHook(job db.Job, baseEnv []string) {
	h.runner.Run(h.Context(), job, baseEnv)
}

// goAfterExit runs afterExit in a goroutine of the service, for a job
// this supervisor ended without a runner (it failed to start, or it ended
// while queued). Once the supervisor is closing, nothing is run.
func (h *hooks) goAfterExit(job db.Job) {
	h.goRun(func() { h.afterExit(job, nil) })
}

// goRun runs f in a goroutine of the service, counted only while the
// supervisor takes work (Supervisor.admit), and reports whether it did.
func (h *hooks) goRun(f func()) bool {
	return h.s.admit(func() {
		h.Go(func(context.Context) { f() })
	}) == nil
}

// hookLost runs the on_exit command of a job this supervisor did not see
// end (it marked it lost, or found its hook due: see runDueHooks), in a
// goroutine of the service. Config.OnExit is not called: the job was not
// this supervisor's.
func (h *hooks) hookLost(job db.Job) {
	if job.OnExit == "" {
		return
	}
	if !h.goRun(func() { h.runHook(job, nil) }) {
		h.s.logf("on-exit hook of job %s skipped: supervisor closing", job.ID)
	}
}

// goDueHooks runs the hooks due at Open in the background (see
// runDueHooks): a long history must not hold up serving.
func (h *hooks) goDueHooks(dead []db.Supervisor) {
	h.Go(func(ctx context.Context) { h.runDueHooks(ctx, dead) })
}

// deadSupervisors returns the supervisors that died unnoticed: not
// recorded as ended, their lock free. The jobs they saw end may have hooks
// nobody claimed (see runDueHooks), which records them as ended.
func (h *hooks) deadSupervisors(ctx context.Context) []db.Supervisor {
	s := h.s
	sups, err := s.db.OpenSupervisors(ctx)
	if err != nil {
		s.logf("%v", err)
		return nil
	}
	var dead []db.Supervisor
	for _, sup := range sups {
		if sup.ID != s.id && !protocol.SupervisorAlive(sup) {
			dead = append(dead, sup)
		}
	}
	return dead
}

// runDueHooks starts, in the background, the on_exit hooks that are due
// and that nobody ran: those of jobs that ended while no supervisor ran
// to run them. Reads record jobs lost and start nothing (see pkg/jobs), so
// those hooks wait in the database for a supervisor: the next one to open
// runs them, and a running one's janitor each round.
//
// Due are the hooks of lost jobs and, given the supervisors that died
// unnoticed (dead), those of the pipe jobs they recorded the end of and
// died before claiming the hook; dead are then recorded as ended, so that
// the next supervisor does not look again. (A tmux job's hook is its
// tmux-pipe helper's, which needs no supervisor.) Each hook runs once
// however many supervisors find it: runHook claims it in the database
// first (db.ClaimHook).
func (h *hooks) runDueHooks(ctx context.Context, dead []db.Supervisor) {
	s := h.s
	lost, err := s.db.PendingHooks(ctx, s.db.Now().Add(-s.cfg.EventRetention))
	if err != nil {
		s.logf("%v", err)
	}
	for _, j := range lost {
		h.hookLost(j)
	}
	if len(dead) == 0 {
		return
	}
	ids := map[string]bool{}
	since := dead[0].StartedAt
	for _, sup := range dead {
		ids[sup.ID] = true
		if sup.StartedAt.Before(since) {
			since = sup.StartedAt
		}
	}
	ended, err := s.db.PendingEndedHooks(ctx, since)
	if err != nil {
		s.logf("%v", err)
		return
	}
	for _, j := range ended {
		if ids[j.SupervisorID] && j.Mode != vocab.ModeTmux {
			h.hookLost(j)
		}
	}
	for _, sup := range dead {
		if err := s.db.EndSupervisor(ctx, sup.ID); err != nil {
			s.logf("%v", err)
		}
	}
}
