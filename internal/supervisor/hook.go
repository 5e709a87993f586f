package supervisor

import (
	"context"
	"github.com/agentjobs/jobs/internal/hook"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// afterExit runs what waits for a job's end: Config.OnExit and the job's
// on_exit command. Neither can change the job.
func (s *Supervisor) afterExit(job db.Job, baseEnv []string) {
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
		s.runHook(job, baseEnv)
	}
}

// runHook runs the job's on_exit command (hook.Runner), bounded by
// HookTimeout. A hook runs once per job whoever notices the job's end: the
// claim in the database decides between this supervisor and any other
// that found the same lost job.
func (s *Supervisor) runHook(job db.Job, baseEnv []string) {
	r := hook.Runner{DB: s.db, Timeout: s.cfg.HookTimeout, Reaper: s.reaper, Logf: s.cfg.Logf}
	r.Run(s.ctx, job, baseEnv)
}

// hookLost runs the on_exit command of a job this supervisor did not see
// end (it marked it lost, or found its hook due: see runDueHooks), in a
// goroutine owned by wg. Config.OnExit is not called: the job was not this
// supervisor's.
func (s *Supervisor) hookLost(job db.Job) {
	if job.OnExit == "" {
		return
	}
	// Counting the goroutine under mu while not closing orders the Add
	// before shutdown's wg.Wait.
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closing {
		s.logf("on-exit hook of job %s skipped: supervisor closing", job.ID)
		return
	}
	go func() {
		defer s.wg.Done()
		s.runHook(job, nil)
	}()
}

// deadSupervisors returns the supervisors that died unnoticed: not
// recorded as ended, their lock free. The jobs they saw end may have hooks
// nobody claimed (see runDueHooks), which records them as ended.
func (s *Supervisor) deadSupervisors(ctx context.Context) []db.Supervisor {
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
func (s *Supervisor) runDueHooks(ctx context.Context, dead []db.Supervisor) {
	lost, err := s.db.PendingHooks(ctx, s.db.Now().Add(-s.cfg.EventRetention))
	if err != nil {
		s.logf("%v", err)
	}
	for _, j := range lost {
		s.hookLost(j)
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
			s.hookLost(j)
		}
	}
	for _, sup := range dead {
		if err := s.db.EndSupervisor(ctx, sup.ID); err != nil {
			s.logf("%v", err)
		}
	}
}
