package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// environ is the supervisor's own environment (a variable for tests).
var environ = os.Environ

// expiredPage is how many expired job ids the janitor reads at a time.
const expiredPage = 1000

// JanitorResult says what one janitor pass did.
type JanitorResult struct {
	Lost          int   // jobs of dead supervisors marked lost
	Deleted       int   // finished jobs deleted after their ttl
	EventsDeleted int64 // events older than the retention deleted
}

// RunJanitor runs one janitor pass over d, as `jobs gc` does: SweepLost,
// then deletes the finished jobs whose ttl has passed since their last
// access, then the events older than retention (0 means
// DefaultEventRetention). Any process may run it; it needs no supervisor.
func RunJanitor(ctx context.Context, d *db.DB, retention time.Duration) (JanitorResult, error) {
	return runJanitor(ctx, d, retention, nil, true)
}

// runJanitor is one janitor pass; with expire false it only sweeps lost
// jobs and deletes nothing.
func runJanitor(ctx context.Context, d *db.DB, retention time.Duration, onLost func(db.Job), expire bool) (JanitorResult, error) {
	if retention <= 0 {
		retention = DefaultEventRetention
	}
	var res JanitorResult
	var errs []error
	n, err := sweepLost(ctx, d, onLost)
	res.Lost = n
	if err != nil {
		errs = append(errs, err)
	}
	if expire {
		// Expired jobs go a thousand ids at a time, each deleted in short
		// transactions: a long history expiring at once must not keep the
		// supervisor from writing output and statuses meanwhile.
		now := d.Now()
		for {
			ids, err := d.ExpiredJobIDs(ctx, now, expiredPage)
			if err != nil {
				errs = append(errs, err)
				break
			}
			n, err := d.DeleteFinishedJobs(ctx, ids)
			res.Deleted += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if len(ids) < expiredPage {
				break
			}
		}
		if res.EventsDeleted, err = d.DeleteEventsBefore(ctx, d.Now().Add(-retention)); err != nil {
			errs = append(errs, err)
		}
	}
	if res.Deleted > 0 || res.EventsDeleted > 0 {
		if _, err := d.ReleaseFreePages(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	return res, nil
}

// SweepLost marks lost the active jobs of every supervisor that died (its
// lock is free), with reason "supervisor <id> died". It records no
// supervisor's end: the next supervisor does, once it has run the hooks
// the dead one left due (see runDueHooks). It returns how many jobs it marked. Any process may
// call it; racing callers each mark a job at most once between them,
// because the transition is conditional on the current status.
//
// tmux jobs whose session still lives are skipped: their process runs in
// tmux, not under the dead supervisor, and their tmux-pipe helper records
// them (see tmux.go). A tmux job whose session is gone is marked lost.
func SweepLost(ctx context.Context, d *db.DB) (int, error) {
	return sweepLost(ctx, d, nil)
}

func sweepLost(ctx context.Context, d *db.DB, onLost func(db.Job)) (int, error) {
	sups, err := d.SupervisorsWithActiveJobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep lost jobs: %w", err)
	}
	n := 0
	var errs []error
	for _, sup := range sups {
		if protocol.SupervisorAlive(sup) {
			continue
		}
		jobs, err := d.FindJobs(ctx, db.Filter{
			AllScopes: true, SupervisorID: sup.ID,
			Statuses: []vocab.Status{vocab.StatusStarting, vocab.StatusRunning},
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, j := range jobs {
			if j.Mode == vocab.ModeTmux && tmuxJobAlive(j) {
				continue // its tmux-pipe helper still records it, see above
			}
			lost, err := d.Transition(ctx, j.ID, lostTransition(ctx, d, j, fmt.Sprintf("supervisor %s died", sup.ID)))
			if errors.Is(err, vocab.ErrInvalidTransition) || errors.Is(err, vocab.ErrNotFound) {
				continue // finished or swept by someone else meanwhile
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n++
			if onLost != nil {
				onLost(lost)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("sweep lost jobs: %w", err)
	}
	return n, nil
}

// lostTransition is the move of an active job whose supervisor is gone to
// lost. Its processes are not killed behind the user's back (jobs kill ends
// them), so the event lists, under "survivors", the pids of those still
// alive and proven the job's: the audit trail says what was left running.
func lostTransition(ctx context.Context, d *db.DB, j db.Job, reason string) db.Transition {
	// Judged as what it is about to be: a job whose end nobody saw.
	j.Status = vocab.StatusLost
	survivors := []int{}
	t := control.Target(ctx, d, j)
	if pids, err := control.Members(t); err == nil && pids != nil {
		survivors = pids
	}
	if len(survivors) == 0 {
		_ = proc.RemoveCgroup(t.Cgroup) // nothing left in it
	}
	return db.Transition{To: vocab.StatusLost, Reason: reason, Detail: map[string]any{"survivors": survivors}}
}

// sweep is SweepLost that also runs the on_exit hooks of the jobs it marks.
func (s *Supervisor) sweep(ctx context.Context) (int, error) {
	return sweepLost(ctx, s.db, s.hookLost)
}

// janitor runs the janitor every JanitorInterval until Close.
func (s *Supervisor) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.JanitorInterval)
	defer t.Stop()
	clock := newClockWatch(s.db.Now, s.cfg.Monotonic)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.janitorRound(clock)
	}
}

// janitorRound is one round of the supervisor's janitor. A round in which
// the wall clock jumped deletes nothing (see clockWatch).
func (s *Supervisor) janitorRound(clock *clockWatch) JanitorResult {
	expire := true
	if jump := clock.jump(); jump > maxClockJump || jump < -maxClockJump {
		s.logf("janitor: the wall clock moved %s against the monotonic clock since the last round; nothing is deleted this round", jump.Round(time.Second))
		expire = false
	}
	dead := s.deadSupervisors(s.ctx)
	res, err := runJanitor(s.ctx, s.db, s.cfg.EventRetention, s.hookLost, expire)
	if err != nil && s.ctx.Err() == nil {
		s.logf("janitor: %v", err)
	}
	s.runDueHooks(s.ctx, dead)
	s.dropEmptyCgroups(s.ctx)
	s.app.CheckpointSoon()
	if res.Lost > 0 || res.Deleted > 0 {
		s.logf("janitor: %d jobs lost, %d expired jobs deleted, %d events deleted", res.Lost, res.Deleted, res.EventsDeleted)
	}
	return res
}

// dropEmptyCgroups removes the empty cgroups beneath the supervisor's own
// that belong to finished jobs of its database: a job whose leftover
// processes ended on their own (not through a kill) leaves one. Cgroups of
// jobs of other databases, and of jobs still starting or running, are
// left alone.
func (s *Supervisor) dropEmptyCgroups(ctx context.Context) {
	dir, names := proc.JobCgroups("jobs-")
	for _, name := range names {
		j, err := s.db.FindJobByID(ctx, strings.TrimPrefix(name, "jobs-"))
		if err != nil || !j.Status.Terminal() {
			continue
		}
		_ = proc.RemoveCgroup(filepath.Join(dir, name)) // EBUSY while processes are left
	}
}

// maxClockJump is how far the wall clock may move against the monotonic
// clock between two janitor rounds before the round deletes nothing.
const maxClockJump = time.Minute

// monotonicOrigin anchors monotonic; only its monotonic reading is used.
var monotonicOrigin = time.Now()

// monotonic is the default Config.Monotonic: Go's monotonic clock.
func monotonic() time.Duration { return time.Since(monotonicOrigin) }

// clockWatch notices the wall clock jumping between janitor rounds. Expiry
// compares stored wall-clock times (last access + ttl, event times) with
// the wall clock, since those times are shared with other processes and
// with sqlite3. A clock set two days ahead, by hand or by a bad time
// source, would then delete every finished job at once. Between two rounds
// the wall clock should move as far as the monotonic clock does; when the
// two differ by more than maxClockJump the round deletes nothing. The next
// round measures from the new time again, so a clock that was really wrong
// and is then set right costs one round, and a machine resumed from suspend
// (the monotonic clock stops while suspended) resumes expiry one round
// later.
type clockWatch struct {
	wall     func() time.Time
	mono     func() time.Duration
	lastWall time.Time
	lastMono time.Duration
}

func newClockWatch(wall func() time.Time, mono func() time.Duration) *clockWatch {
	// Round(0) strips the monotonic reading that time.Now carries:
	// without it, Sub would compare monotonic readings and never see a
	// jump of the wall clock.
	return &clockWatch{wall: wall, mono: mono, lastWall: wall().Round(0), lastMono: mono()}
}

// jump returns how much further the wall clock moved than the monotonic
// clock since the previous call, and starts the next interval.
func (c *clockWatch) jump() time.Duration {
	w, m := c.wall().Round(0), c.mono()
	d := w.Sub(c.lastWall) - (m - c.lastMono)
	c.lastWall, c.lastMono = w, m
	return d
}
