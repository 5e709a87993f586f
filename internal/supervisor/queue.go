package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// queueLook is how often the dispatcher looks at the queue while it owns
// queued jobs, besides the looks that a job's end or a new queued job set
// off here: what other processes change (a queue resumed, a dependency
// ended under another supervisor, a queued job killed) is seen within it.
const queueLook = 500 * time.Millisecond

// queued reports whether a start asks to wait (a queue or dependencies).
func queued(nj db.NewJob) bool { return nj.Queue != "" || len(nj.After) > 0 }

// startQueued creates a job that may wait (see db.CreateJobQueued), then
// gives the queue a look, so that a job whose turn has come starts before
// the answer. It returns the job as it is then: queued, or started.
func (s *Supervisor) startQueued(ctx context.Context, req protocol.StartRequest, nj db.NewJob) (db.Job, error) {
	if nj.Mode == vocab.ModeTmux && queued(nj) {
		return db.Job{}, fmt.Errorf("start job: %w", invalid(errors.New("a tmux job cannot wait in a queue or for other jobs")))
	}
	if err := s.takingJobs(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	req.Job = nj
	// What is kept in the database for a supervisor that takes the job
	// over leaves out every environment value (see queuedEnv).
	kept := req
	kept.Env, kept.BaseEnv = nil, nil
	request, err := json.Marshal(kept)
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	job, err := s.db.CreateJobQueued(ctx, nj, s.limitsFor(req), request)
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	if job.Status != vocab.StatusQueued {
		// Room under the cap after all: start it as any job. Its request
		// was not kept (only a queued job's is).
		return s.startCreated(ctx, req, job)
	}
	s.keepQueuedEnv(job.ID, req)
	s.queuedCount.Add(1)
	s.dispatch(ctx)
	if j, err := s.db.FindJobByID(ctx, job.ID); err == nil {
		job = j
	}
	if job.Status != vocab.StatusQueued {
		// Claimed: its answer is the one a plain start gives, once its
		// process runs.
		if c := s.child(job.ID); c != nil {
			<-c.ready
			c.mu.Lock()
			if c.job.Status != vocab.StatusStarting {
				job = c.job
			}
			c.mu.Unlock()
		}
		if j, err := s.db.FindJobByID(ctx, job.ID); err == nil {
			job = j
		}
	}
	return job, nil
}

// takingJobs is nil unless the supervisor is closing or not open.
func (s *Supervisor) takingJobs() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
		return errors.New("supervisor is not open")
	}
	if s.closing {
		return vocab.ErrSupervisorClosed
	}
	return nil
}

// startCreated starts the process of job, created in status starting,
// as Start does.
func (s *Supervisor) startCreated(ctx context.Context, req protocol.StartRequest, job db.Job) (db.Job, error) {
	_, argv, env, err := s.prepare(req)
	if err != nil {
		_, _ = s.db.Transition(ctx, job.ID, db.Transition{To: vocab.StatusFailed, Reason: err.Error()})
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	base := req.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	c, err := s.register(job.ID, base)
	if err != nil {
		ended, terr := s.db.Transition(context.WithoutCancel(ctx), job.ID, db.Transition{To: vocab.StatusFailed, Reason: "not started: " + err.Error()})
		if terr != nil {
			return job, fmt.Errorf("start job: %w", errors.Join(err, terr))
		}
		return ended, nil
	}
	c.timeoutGrace = cmp.Or(req.TimeoutGrace, s.cfg.Grace)
	c.mu.Lock()
	c.job = job
	c.mu.Unlock()
	return s.spawn(context.WithoutCancel(ctx), c, req, argv, env)
}

// kickQueue asks the dispatcher for a look at the queue.
func (s *Supervisor) kickQueue() {
	select {
	case s.queueKick <- struct{}{}:
	default:
	}
}

// dispatcher looks at the queue when kicked, and every queueLook while
// the supervisor owns queued jobs, until Close.
func (s *Supervisor) dispatcher() {
	defer s.wg.Done()
	t := time.NewTicker(queueLook)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.queueKick:
		case <-t.C:
			if s.queuedCount.Load() == 0 {
				continue
			}
		}
		s.dispatch(s.ctx)
	}
}

// dispatch starts, in their order, the queued jobs of this supervisor
// whose turn has come (db.ClaimQueued), one look at a time.
func (s *Supervisor) dispatch(ctx context.Context) {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	if s.takingJobs() != nil {
		return
	}
	claims, failed, err := s.db.ClaimQueued(ctx, s.id, s.cfg.Limits)
	if err != nil && ctx.Err() == nil {
		s.logf("start queued jobs: %v", err)
	}
	for _, j := range failed {
		// Ended without a process: its exit hooks run as any end's.
		s.hookEnded(j)
	}
	for _, cl := range claims {
		var req protocol.StartRequest
		if len(cl.Request) > 0 && string(cl.Request) != "null" {
			if err := json.Unmarshal(cl.Request, &req); err != nil {
				s.logf("job %s: read its start request: %v", cl.Job.ID, err)
			}
		}
		req.Job = newJobOf(cl.Job, req.Job)
		if env, ok := s.takeQueuedEnv(cl.Job.ID); ok {
			req.Env, req.BaseEnv = env.env, env.base
		} else if len(cl.Job.EnvNames) > 0 {
			// Queued by a supervisor that is gone, with --env values
			// that went with it: starting without them could run
			// something else than what was asked.
			reason := fmt.Sprintf("not started: the values of its --env variables (%s) are never stored, and the supervisor that queued it is gone", strings.Join(cl.Job.EnvNames, ", "))
			if j, err := s.db.Transition(context.WithoutCancel(ctx), cl.Job.ID, db.Transition{To: vocab.StatusFailed, Reason: reason}); err != nil {
				s.logf("job %s: %v", cl.Job.ID, err)
			} else {
				s.hookEnded(j)
			}
			continue
		}
		// Started in order, one after the other: a queue keeps its order.
		if _, err := s.startCreated(context.WithoutCancel(ctx), req, cl.Job); err != nil {
			s.logf("start queued job %s: %v", cl.Job.ID, err)
		}
	}
	if n, err := s.db.CountQueued(ctx, s.id); err == nil {
		s.queuedCount.Store(int64(n))
		s.poke()
	}
}

// hookEnded runs what follows the end of a job this supervisor ended
// without a process (a queued job whose dependency failed), in a goroutine
// owned by wg.
func (s *Supervisor) hookEnded(job db.Job) {
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closing {
		return
	}
	go func() {
		defer s.wg.Done()
		s.afterExit(job, nil)
	}()
}

// newJobOf is the NewJob of a claimed job: what its row says, over what
// its kept request said (which a job queued by an older client may lack).
func newJobOf(j db.Job, nj db.NewJob) db.NewJob {
	nj.ID, nj.Scope, nj.Name, nj.Label = j.ID, j.Scope, j.Name, j.Label
	nj.Command, nj.Argv, nj.Cwd, nj.EnvNames = j.Command, j.Argv, j.Cwd, j.EnvNames
	nj.Mode, nj.Stdin, nj.Color, nj.OnExit = j.Mode, j.Stdin, j.Color, j.OnExit
	nj.Timeout, nj.TTL, nj.MaxOutput = j.Timeout, j.TTL, j.MaxOutput
	return nj
}

// adoptQueued takes over the queued jobs of supervisors that are gone.
func (s *Supervisor) adoptQueued(ctx context.Context) {
	n, err := s.db.AdoptQueued(ctx, s.id, protocol.SupervisorAlive)
	if err != nil {
		s.logf("%v", err)
	}
	if n > 0 {
		s.logf("took over %d queued jobs of supervisors that are gone", n)
		s.queuedCount.Add(int64(n))
		s.kickQueue()
	}
}

// endQueued moves the queued jobs this supervisor owns to killed with
// reason.
func (s *Supervisor) endQueued(ctx context.Context, reason string) {
	ctx, cancel := context.WithTimeout(ctx, db.FinalWriteTimeout)
	defer cancel()
	queued, err := s.db.FindJobs(ctx, db.Filter{AllScopes: true, SupervisorID: s.id, Statuses: []vocab.Status{vocab.StatusQueued}})
	if err != nil {
		s.logf("end queued jobs: %v", err)
		return
	}
	for _, j := range queued {
		if _, err := s.db.Transition(ctx, j.ID, db.Transition{To: vocab.StatusKilled, Reason: reason}); err != nil &&
			!errors.Is(err, vocab.ErrInvalidTransition) {
			s.logf("end queued job %s: %v", j.ID, err)
		}
	}
}

// queuedEnv is the environment a queued job was asked to run with.
type queuedEnv struct{ env, base []string }

// keepQueuedEnv keeps the environment of a job this supervisor queued
// until its turn comes. A job taken over from a supervisor that is gone
// runs with this supervisor's environment, or fails if it was given --env
// values (dispatch).
func (s *Supervisor) keepQueuedEnv(id string, req protocol.StartRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queuedEnv == nil {
		s.queuedEnv = map[string]queuedEnv{}
	}
	s.queuedEnv[id] = queuedEnv{env: req.Env, base: req.BaseEnv}
}

// takeQueuedEnv returns and forgets the environment kept for a job.
func (s *Supervisor) takeQueuedEnv(id string) (queuedEnv, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.queuedEnv[id]
	delete(s.queuedEnv, id)
	return e, ok
}
