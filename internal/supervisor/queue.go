package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/vocab"
)

// queueLook is how often the dispatcher looks at the queue while it owns
// queued jobs, besides the looks that a job's end or a new queued job set
// off here: what other processes change (a queue resumed, a dependency
// ended under another supervisor, a queued job killed) is seen within it.
const queueLook = 500 * time.Millisecond

// queue is the service that starts the queued jobs the supervisor owns,
// in their order, when their turn comes: at Start it takes over those of
// supervisors that are gone; its dispatcher looks at the queue when
// kicked (a job's end, a new queued job) and every queueLook while it owns
// queued jobs.
type queue struct {
	startstop.Base
	s *Supervisor

	// kickc asks the dispatcher for a look at the queue; dispatchMu makes
	// the looks one at a time; queued is how many queued jobs the
	// supervisor owns, as of its last look (it keeps the supervisor from
	// its idle exit).
	kickc      chan struct{}
	dispatchMu sync.Mutex
	queued     atomic.Int64

	// env holds, in memory only, the environment (the caller's and the
	// --env values) of each job this supervisor queued: values are never
	// stored. Guarded by mu.
	mu  sync.Mutex
	env map[string]queuedEnv
}

func newQueue(s *Supervisor) *queue {
	return &queue{s: s, kickc: make(chan struct{}, 1)}
}

// Start takes over the queued jobs of supervisors that are gone (they
// start in their order) and starts the dispatcher.
func (q *queue) Start(ctx context.Context) error {
	q.Init(ctx)
	q.adopt(ctx)
	if n, err := q.s.db.CountQueued(ctx, q.s.id); err == nil {
		q.queued.Store(int64(n))
	}
	q.Go(q.dispatcher)
	q.kick()
	return nil
}

// Stop ends the dispatcher and waits for the look under way.
func (q *queue) Stop() error {
	q.Halt()
	return nil
}

// count is how many queued jobs the supervisor owns.
func (q *queue) count() int64 { return q.queued.Load() }

// queued reports whether a start asks to wait (a queue or dependencies).
func queued(nj db.NewJob) bool { return nj.Queue != "" || len(nj.After) > 0 }

// startQueued creates a job that may wait (see db.CreateJobQueued), then
// gives the queue a look, so that a job whose turn has come starts before
// the answer. It returns the job as it is then: queued, or started.
func (q *queue) startQueued(ctx context.Context, req protocol.StartRequest, nj db.NewJob) (db.Job, error) {
	if nj.Mode == vocab.ModeTmux && queued(nj) {
		return db.Job{}, fmt.Errorf("start job: %w", invalid(errors.New("a tmux job cannot wait in a queue or for other jobs")))
	}
	if err := q.s.takingJobs(); err != nil {
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
	job, err := q.s.db.CreateJobQueued(ctx, nj, q.s.limitsFor(req), request)
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	if job.Status != vocab.StatusQueued {
		// Room under the cap after all: start it as any job. Its request
		// was not kept (only a queued job's is).
		return q.s.startCreated(ctx, req, job)
	}
	q.keepEnv(job.ID, req)
	q.queued.Add(1)
	q.dispatch(ctx)
	if j, err := q.s.db.FindJobByID(ctx, job.ID); err == nil {
		job = j
	}
	if job.Status != vocab.StatusQueued {
		// Claimed: its answer is the one a plain start gives, once its
		// process runs.
		if c := q.s.runners.child(job.ID); c != nil {
			<-c.ready
			c.mu.Lock()
			if c.job.Status != vocab.StatusStarting {
				job = c.job
			}
			c.mu.Unlock()
		}
		if j, err := q.s.db.FindJobByID(ctx, job.ID); err == nil {
			job = j
		}
	}
	return job, nil
}

// kick asks the dispatcher for a look at the queue.
func (q *queue) kick() {
	select {
	case q.kickc <- struct{}{}:
	default:
	}
}

// dispatcher looks at the queue when kicked, and every queueLook while
// the supervisor owns queued jobs, until Stop.
func (q *queue) dispatcher(ctx context.Context) {
	t := time.NewTicker(queueLook)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kickc:
		case <-t.C:
			if q.queued.Load() == 0 {
				continue
			}
		}
		q.dispatch(ctx)
	}
}

// dispatch starts, in their order, the queued jobs of this supervisor
// whose turn has come (db.ClaimQueued), one look at a time.
func (q *queue) dispatch(ctx context.Context) {
	q.dispatchMu.Lock()
	defer q.dispatchMu.Unlock()
	if q.s.takingJobs() != nil {
		return
	}
	claims, failed, err := q.s.db.ClaimQueued(ctx, q.s.id, q.s.cfg.Limits)
	if err != nil && ctx.Err() == nil {
		q.s.logf("start queued jobs: %v", err)
	}
	for _, j := range failed {
		// Ended without a process: its exit hooks run as any end'q.s.
		q.s.hooks.goAfterExit(j)
	}
	for _, cl := range claims {
		var req protocol.StartRequest
		if len(cl.Request) > 0 && string(cl.Request) != "null" {
			if err := json.Unmarshal(cl.Request, &req); err != nil {
				q.s.logf("job %s: read its start request: %v", cl.Job.ID, err)
			}
		}
		req.Job = newJobOf(cl.Job, req.Job)
		if env, ok := q.takeEnv(cl.Job.ID); ok {
			req.Env, req.BaseEnv = env.env, env.base
		} else if len(cl.Job.EnvNames) > 0 {
			// Queued by a supervisor that is gone, with --env values
			// that went with it: starting without them could run
			// something else than what was asked.
			reason := fmt.Sprintf("not started: the values of its --env variables (%s) are never stored, and the supervisor that queued it is gone", strings.Join(cl.Job.EnvNames, ", "))
			if j, err := q.s.db.Transition(context.WithoutCancel(ctx), cl.Job.ID, db.Transition{To: vocab.StatusFailed, Reason: reason}); err != nil {
				q.s.logf("job %s: %v", cl.Job.ID, err)
			} else {
				q.s.hooks.goAfterExit(j)
			}
			continue
		}
		// Started in order, one after the other: a queue keeps its order.
		if _, err := q.s.startCreated(context.WithoutCancel(ctx), req, cl.Job); err != nil {
			q.s.logf("start queued job %s: %v", cl.Job.ID, err)
		}
	}
	if n, err := q.s.db.CountQueued(ctx, q.s.id); err == nil {
		q.queued.Store(int64(n))
		q.s.poke()
	}
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

// adopt takes over the queued jobs of supervisors that are gone.
func (q *queue) adopt(ctx context.Context) {
	n, err := q.s.db.AdoptQueued(ctx, q.s.id, protocol.SupervisorAlive)
	if err != nil {
		q.s.logf("%v", err)
	}
	if n > 0 {
		q.s.logf("took over %d queued jobs of supervisors that are gone", n)
		q.queued.Add(int64(n))
		q.kick()
	}
}

// endAll moves the queued jobs this supervisor owns to killed with
// reason.
func (q *queue) endAll(ctx context.Context, reason string) {
	q.dispatchMu.Lock() // no look at the queue is under way
	defer q.dispatchMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, db.FinalWriteTimeout)
	defer cancel()
	queued, err := q.s.db.FindJobs(ctx, db.Filter{AllScopes: true, SupervisorID: q.s.id, Statuses: []vocab.Status{vocab.StatusQueued}})
	if err != nil {
		q.s.logf("end queued jobs: %v", err)
		return
	}
	for _, j := range queued {
		if _, err := q.s.db.Transition(ctx, j.ID, db.Transition{To: vocab.StatusKilled, Reason: reason}); err != nil &&
			!errors.Is(err, vocab.ErrInvalidTransition) {
			q.s.logf("end queued job %s: %v", j.ID, err)
		}
	}
}

// queuedEnv is the environment a queued job was asked to run with.
type queuedEnv struct{ env, base []string }

// keepEnv keeps the environment of a job this supervisor queued
// until its turn comes. A job taken over from a supervisor that is gone
// runs with this supervisor's environment, or fails if it was given --env
// values (dispatch).
func (q *queue) keepEnv(id string, req protocol.StartRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.env == nil {
		q.env = map[string]queuedEnv{}
	}
	q.env[id] = queuedEnv{env: req.Env, base: req.BaseEnv}
}

// takeEnv returns and forgets the environment kept for a job.
func (q *queue) takeEnv(id string) (queuedEnv, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.env[id]
	delete(q.env, id)
	return e, ok
}
