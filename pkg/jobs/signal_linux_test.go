package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestRealTimeSignalReason: a real-time signal has only a number, and the
// reason says it is a signal ("killed by signal 34", not "killed by 34").
func TestRealTimeSignalReason(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Signal(ctx, j.ID, "34"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Jobs[0]; got.Status != jobs.StatusFailed || got.Reason != "killed by signal 34" {
		t.Errorf("status %s, reason %q; want failed, \"killed by signal 34\"", got.Status, got.Reason)
	}
}
