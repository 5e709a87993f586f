package supervisor

import (
	"context"
	"github.com/agentjobs/jobs/internal/sweep"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/proc"
)

// sweep is sweep.Lost that also runs the on_exit hooks of the jobs it marks.
func (s *Supervisor) sweep(ctx context.Context) (int, error) {
	return sweep.Lost(ctx, s.db, s.hookLost)
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
func (s *Supervisor) janitorRound(clock *clockWatch) sweep.Result {
	expire := true
	if jump := clock.jump(); jump > maxClockJump || jump < -maxClockJump {
		s.logf("janitor: the wall clock moved %s against the monotonic clock since the last round; nothing is deleted this round", jump.Round(time.Second))
		expire = false
	}
	dead := s.deadSupervisors(s.ctx)
	res, err := sweep.Pass(s.ctx, s.db, s.cfg.EventRetention, s.hookLost, expire)
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
