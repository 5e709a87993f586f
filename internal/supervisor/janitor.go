package supervisor

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/sweep"
)

// janitor is the service that keeps the database in order while the
// supervisor runs: at Start it marks lost the jobs of dead supervisors and
// has the hooks they left due run; then, every JanitorInterval, a round
// (sweep.Pass, the due hooks, empty cgroups, a checkpoint nudge).
type janitor struct {
	startstop.Base
	s *Supervisor
}

// Start marks lost the running jobs of every dead supervisor (running
// their hooks), has the hooks due since then run in the background, and
// starts the rounds.
func (j *janitor) Start(ctx context.Context) error {
	j.Init(ctx)
	s := j.s
	dead := s.hooks.deadSupervisors(ctx)
	if n, err := j.sweep(ctx); err != nil {
		s.logf("sweep lost jobs: %v", err)
	} else if n > 0 {
		s.logf("marked %d jobs of dead supervisors lost", n)
	}
	j.Go(j.loop)
	s.hooks.goDueHooks(dead)
	return nil
}

// Stop ends the rounds and waits for the one under way.
func (j *janitor) Stop() error {
	j.Halt()
	return nil
}

// sweep is sweep.Lost that also runs the on_exit hooks of the jobs it marks.
func (j *janitor) sweep(ctx context.Context) (int, error) {
	return sweep.Lost(ctx, j.s.db, j.s.hooks.hookLost)
}

// loop runs a round every JanitorInterval until Stop.
func (j *janitor) loop(ctx context.Context) {
	s := j.s
	t := time.NewTicker(s.cfg.JanitorInterval)
	defer t.Stop()
	clock := newClockWatch(s.db.Now, s.cfg.Monotonic)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j.round(clock)
	}
}

// round is one round of the supervisor's janitor. A round in which the
// wall clock jumped deletes nothing (see clockWatch).
func (j *janitor) round(clock *clockWatch) sweep.Result {
	s := j.s
	ctx := j.Context()
	expire := true
	if jump := clock.jump(); jump > maxClockJump || jump < -maxClockJump {
		s.logf("janitor: the wall clock moved %s against the monotonic clock since the last round; nothing is deleted this round", jump.Round(time.Second))
		expire = false
	}
	dead := s.hooks.deadSupervisors(ctx)
	res, err := sweep.Pass(ctx, s.db, s.cfg.EventRetention, s.hooks.hookLost, expire)
	if err != nil && ctx.Err() == nil {
		s.logf("janitor: %v", err)
	}
	s.hooks.runDueHooks(ctx, dead)
	j.dropEmptyCgroups(ctx)
	s.runners.checkpointSoon()
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
func (j *janitor) dropEmptyCgroups(ctx context.Context) {
	dir, names := proc.JobCgroups("jobs-")
	for _, name := range names {
		job, err := j.s.db.FindJobByID(ctx, strings.TrimPrefix(name, "jobs-"))
		if err != nil || !job.Status.Terminal() {
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
