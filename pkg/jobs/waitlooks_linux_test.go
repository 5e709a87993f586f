package jobs_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// Waits sleep until something they wait for may have happened: the tests
// below count their looks at the database (jobs.Looks) during a span of
// waiting, not how long anything took. Looks come at most as often as the
// wait's wakes, so a loaded machine only lowers the counts.

// TestIdleWaitLooksRarely: a wait for a quiet job to end looks at the
// database a handful of times in six seconds (when it starts, when it
// starts watching, and every few seconds for a supervisor that died), not
// after every short sleep.
func TestIdleWaitLooksRarely(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Argv: []string{"sleep", "120"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, j.ID, 0)
	before := jobs.Looks(c)
	r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != jobs.WaitTimedOut {
		t.Fatalf("wait on a quiet job: %s, want timed out", r.Reason)
	}
	if n := jobs.Looks(c) - before; n > 8 {
		t.Errorf("a wait of 6 s on a quiet job looked at the database %d times, want at most 8", n)
	}
}

// TestFollowersSleepThroughAFlood: log -f and events -f of a quiet job
// wake for another job's flood of output at most about once a second
// after finding nothing in it a few times, not after every write.
func TestFollowersSleepThroughAFlood(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	quiet, err := c.Start(ctx, jobs.Spec{Argv: []string{"sleep", "120"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, quiet.ID, 0)
	flood, err := c.Start(ctx, jobs.Spec{Command: `while :; do echo 'a line of a build log, printed again and again'; done`})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, flood.ID, 0)
	// The flood is on before the followers start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Get(ctx, flood.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.OutputBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flood wrote nothing in 30 s")
		}
		if _, err := c.Wait(ctx, []string{flood.ID}, jobs.WaitOptions{NewOutput: true, Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	const span = 5 * time.Second
	for _, tc := range []struct {
		name   string
		follow func(context.Context) error
	}{
		{"log -f", func(ctx context.Context) error {
			return c.Follow(ctx, quiet.ID, jobs.Range{}, io.Discard)
		}},
		{"events -f", func(ctx context.Context) error {
			since, err := c.EventCursor(ctx, time.Now())
			if err != nil {
				return err
			}
			for _, err := range c.Events(ctx, jobs.EventOptions{Since: since, Follow: true, JobID: quiet.ID}) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := jobs.Looks(c)
			fctx, cancel := context.WithTimeout(ctx, span)
			defer cancel()
			if err := tc.follow(fctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			st, err := c.Get(ctx, flood.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.Terminal() {
				t.Fatalf("the flood ended (%s) while %s waited", st.Status, tc.name)
			}
			// Backing off from 20 ms doubling to 1 s takes six looks
			// and 1.3 s; then one a second, plus the first look.
			if n := jobs.Looks(c) - before; n > 15 {
				t.Errorf("%s of a quiet job looked at the database %d times in %s of another job's flood, want at most 15", tc.name, n, span)
			}
		})
	}
}
