package supervisor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// fakeClock is a wall clock and a monotonic clock that the test moves
// apart, as a clock set by hand or by a bad time source does.
type fakeClock struct {
	base time.Time
	wall atomic.Int64 // offset of the wall clock from base
	mono atomic.Int64 // monotonic reading
}

func newFakeClock() *fakeClock { return &fakeClock{base: time.Now().UTC().Round(0)} }

func (c *fakeClock) now() time.Time           { return c.base.Add(time.Duration(c.wall.Load())) }
func (c *fakeClock) monotonic() time.Duration { return time.Duration(c.mono.Load()) }

// pass lets d go by on both clocks.
func (c *fakeClock) pass(d time.Duration) { c.wall.Add(int64(d)); c.mono.Add(int64(d)) }

// jump moves the wall clock alone.
func (c *fakeClock) jump(d time.Duration) { c.wall.Add(int64(d)) }

// Row B13 guards: a janitor round in which the wall clock jumped (+2 days,
// −1 h) against the monotonic clock deletes nothing; expiry resumes once
// the clock is steady.
func TestB13ClockJumpDeletesNothingEarly(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	clock := newFakeClock()
	d.Now = clock.now
	s := startSupervisor(t, Config{DB: d, JanitorInterval: time.Hour, Monotonic: clock.monotonic})
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "true", TTL: time.Hour}})
	waitDone(t, d, job.ID, 10*time.Second)
	watch := newClockWatch(d.Now, s.cfg.Monotonic)
	exists := func() bool {
		_, err := d.FindJobByID(ctx, job.ID)
		if err != nil && !errors.Is(err, vocab.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	clock.pass(30 * time.Second)
	if res := s.janitor.round(watch); res.Deleted != 0 || !exists() {
		t.Fatalf("a steady round deleted %d jobs before their ttl", res.Deleted)
	}
	clock.pass(30 * time.Second)
	clock.jump(48 * time.Hour)
	if expired, _ := d.ExpiredJobs(ctx, d.Now()); len(expired) != 1 {
		t.Fatalf("after +2 days the wall clock says %d jobs expired, want 1 (the test needs it)", len(expired))
	}
	if res := s.janitor.round(watch); res.Deleted != 0 || !exists() {
		t.Errorf("the round after a +2 day jump deleted %d jobs, want 0", res.Deleted)
	}
	clock.pass(30 * time.Second)
	clock.jump(-time.Hour)
	if res := s.janitor.round(watch); res.Deleted != 0 || !exists() {
		t.Errorf("the round after a -1 h jump deleted %d jobs, want 0", res.Deleted)
	}
	// Steady again: the new time is trusted and the ttl has passed on it.
	clock.pass(30 * time.Second)
	if res := s.janitor.round(watch); res.Deleted != 1 || exists() {
		t.Errorf("a steady round after the jumps deleted %d jobs, want 1", res.Deleted)
	}
	t.Logf("MATRIX-FIGURE %s", "+2 days and -1 h wall jumps: 0 jobs deleted in the jumped rounds; 1 deleted on the next steady round")
}

// Row B13 guards: a timeout is measured on the monotonic clock, so a wall
// clock jump neither ends a job early (+2 days) nor late (-1 h).
func TestB13TimeoutOnMonotonicClock(t *testing.T) {
	for _, jump := range []time.Duration{48 * time.Hour, -time.Hour} {
		t.Run(jump.String(), func(t *testing.T) {
			d := openDB(t)
			clock := newFakeClock()
			d.Now = clock.now
			s := startSupervisor(t, Config{DB: d, Monotonic: clock.monotonic})
			const timeout = time.Second
			began := time.Now()
			job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "sleep"), Timeout: timeout}})
			clock.jump(jump)
			// A timeout on the wall clock would end the job at once
			// after +2 days, and an hour late after -1 h: the upper
			// bound is a deadline for a loaded machine, far below the
			// hour (how soon it ends is the figure, not a check).
			job = waitDone(t, d, job.ID, 2*time.Minute)
			took := time.Since(began)
			if job.Status != vocab.StatusTimedOut {
				t.Fatalf("status %s, want timed_out", job.Status)
			}
			if took < timeout {
				t.Errorf("a %v timeout ended the job after %v of real time with the wall clock moved %v", timeout, took, jump)
			}
			t.Logf("MATRIX-FIGURE %s", "1 s timeout with the wall clock moved "+jump.String()+": timed out after "+took.Round(10*time.Millisecond).String())
		})
	}
}

// Row B13 guards: events are ordered by their sequence (id), not by their
// timestamp, so a clock set back does not reorder a job's history.
func TestB13EventsOrderedBySeq(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	clock := newFakeClock()
	d.Now = clock.now
	s := startSupervisor(t, Config{DB: d, Monotonic: clock.monotonic})
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "sleep"), Timeout: 200 * time.Millisecond}})
	clock.jump(-time.Hour) // the end is stamped an hour before the start
	waitDone(t, d, job.ID, 30*time.Second)
	evs, err := d.Events(ctx, db.EventFilter{AllScopes: true, JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []vocab.Status
	for i, e := range evs {
		if e.Kind != "transition" {
			continue
		}
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("event %d comes after %d", e.ID, evs[i-1].ID)
		}
		got = append(got, e.To)
	}
	want := []vocab.Status{vocab.StatusStarting, vocab.StatusRunning, vocab.StatusTimedOut}
	if len(got) != len(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("transitions %v, want %v", got, want)
			break
		}
	}
	if last := evs[len(evs)-1]; !last.At.Before(evs[0].At) {
		t.Errorf("the last event is stamped %v, not before the first (%v): the clock did not go back", last.At, evs[0].At)
	}
	t.Logf("MATRIX-FIGURE %s", "clock set back 1 h mid-job: history starting → running → timed_out in seq order")
}
