package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// The scope's running cap queues a start instead of refusing it (unless
// the spec says NoQueue); the queued job starts when a running one ends, a
// queued job can be killed, and an in-process client's Close ends the jobs
// still waiting.
func TestScopeCapQueues(t *testing.T) {
	ctx := context.Background()
	c := open(t, jobs.Options{MaxRunningPerScope: 2})
	var running []jobs.Job
	for range 2 {
		j, err := c.Start(ctx, jobs.Spec{Command: "sleep 60"})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, j)
	}
	third, err := c.Start(ctx, jobs.Spec{Command: "echo third"})
	if err != nil {
		t.Fatal(err)
	}
	if third.Status != jobs.StatusQueued || third.QueuePosition != 1 {
		t.Fatalf("a start past the cap: %s at position %d, want queued at 1", third.Status, third.QueuePosition)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "true", NoQueue: true}); !errors.Is(err, jobs.ErrLimit) {
		t.Fatalf("a NoQueue start past the cap: %v, want ErrLimit", err)
	}
	fourth, err := c.Start(ctx, jobs.Spec{Command: "echo fourth"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Kill(ctx, fourth.ID, 0); err != nil || r.Status != jobs.StatusKilled {
		t.Fatalf("kill of a queued job: %+v %v", r, err)
	}
	if got, _ := c.Get(ctx, fourth.ID); got.Status != jobs.StatusKilled || got.Reason != "killed while queued" || got.StartedAt != nil {
		t.Fatalf("the killed queued job: %s %q started %v", got.Status, got.Reason, got.StartedAt)
	}

	if _, err := c.Kill(ctx, running[0].ID, 0); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, []string{third.ID}, jobs.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j := res.Jobs[0]; j.Status != jobs.StatusDone {
		t.Fatalf("the queued job after room was made: %s", j.Status)
	}
	if out, err := c.Log(ctx, third.ID, jobs.Range{}); err != nil || !strings.Contains(out.Text, "third") {
		t.Fatalf("its output: %q %v", out.Text, err)
	}

	// One more past the cap, then Close: it never runs.
	if _, err := c.Start(ctx, jobs.Spec{Command: "sleep 60"}); err != nil {
		t.Fatal(err)
	}
	last, err := c.Start(ctx, jobs.Spec{Command: "echo never"})
	if err != nil || last.Status != jobs.StatusQueued {
		t.Fatalf("start past the cap: %+v %v", last, err)
	}
	path := c.DBPath()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, jobs.Options{DB: path, Detached: true})
	if got, err := r.Get(ctx, last.ID); err != nil || got.Status != jobs.StatusKilled || got.StartedAt != nil {
		t.Fatalf("a queued job of a closed in-process client: %+v %v", got, err)
	}
}
