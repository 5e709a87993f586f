package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestExitHookEveryStatus runs a job to each terminal status a live
// supervisor records and checks the on_exit hook saw it.
func TestExitHookEveryStatus(t *testing.T) {
	c := open(t, jobs.Options{Grace: 200 * time.Millisecond})
	ctx := context.Background()
	dir := t.TempDir()
	for _, tt := range []struct {
		status  jobs.Status
		command string
		timeout time.Duration
		kill    bool
	}{
		{jobs.StatusDone, "echo fine", 0, false},
		{jobs.StatusFailed, "echo bad; exit 5", 0, false},
		{jobs.StatusKilled, "echo up; exec sleep 60", 0, true},
		{jobs.StatusTimedOut, "echo slow; exec sleep 60", 300 * time.Millisecond, false},
	} {
		t.Run(string(tt.status), func(t *testing.T) {
			out := filepath.Join(dir, string(tt.status))
			j, err := c.Start(ctx, jobs.Spec{
				Command: tt.command,
				Timeout: tt.timeout,
				OnExit:  `printf '%s %s %s' "$JOBS_STATUS" "$JOBS_EXIT_CODE" "$JOBS_ID" > ` + out,
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.kill {
				eventually(t, "output", func() bool {
					g, err := c.Get(ctx, j.ID)
					return err == nil && g.OutputBytes > 0
				})
				if _, err := c.Kill(ctx, j.ID, 0); err != nil {
					t.Fatal(err)
				}
			}
			// A failure shows what the job and its hook were at.
			var got string
			testwait.ForLast(t, time.Minute, "hook", func() (bool, string) {
				b, _ := os.ReadFile(out)
				got = string(b)
				if strings.HasSuffix(got, j.ID) {
					return true, ""
				}
				return false, hookState(ctx, c, j.ID, got)
			})
			if !strings.HasPrefix(got, string(tt.status)+" ") {
				t.Errorf("hook saw %q, want status %s", got, tt.status)
			}
			final, err := c.Get(ctx, j.ID)
			if err != nil || final.Status != tt.status {
				t.Errorf("job status %s (%v), want %s", final.Status, err, tt.status)
			}
		})
	}
}

// TestEventsExactlyOnceAcrossSupervisorRestart follows the event stream
// while the detached supervisor is killed and another one starts: every
// transition arrives once, in order, none missing.
func TestEventsExactlyOnceAcrossSupervisorRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := open(t, jobs.Options{DB: path, Detached: true, Executable: jobsBin})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type seen struct {
		id       int64
		job      string
		from, to jobs.Status
	}
	got := make(chan seen, 100)
	followErr := make(chan error, 1)
	go func() {
		for ev, err := range c.Events(ctx, jobs.EventOptions{Follow: true}) {
			if err != nil {
				followErr <- err
				return
			}
			if ev.Kind == "transition" {
				got <- seen{ev.ID, ev.JobID, ev.From, ev.To}
			}
		}
		followErr <- nil
	}()

	first, err := c.Start(ctx, jobs.Spec{Command: "echo one; exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sup, err := d.FindSupervisor(ctx, first.Supervisor)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first job lost", func() bool {
		j, err := c.Get(ctx, first.ID)
		return err == nil && j.Status == jobs.StatusLost
	})
	c.Kill(ctx, first.ID, 0)
	second, err := c.Start(ctx, jobs.Spec{Command: "echo two"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Supervisor == first.Supervisor {
		t.Fatalf("second job ran on the dead supervisor %s", first.Supervisor)
	}

	want := []seen{
		{0, first.ID, "", jobs.StatusStarting},
		{0, first.ID, jobs.StatusStarting, jobs.StatusRunning},
		{0, first.ID, jobs.StatusRunning, jobs.StatusLost},
		{0, second.ID, "", jobs.StatusStarting},
		{0, second.ID, jobs.StatusStarting, jobs.StatusRunning},
		{0, second.ID, jobs.StatusRunning, jobs.StatusDone},
	}
	var last int64
	for i, w := range want {
		select {
		case s := <-got:
			if s.id <= last {
				t.Fatalf("event %d has id %d after %d: repeated or out of order", i, s.id, last)
			}
			last = s.id
			if s.job != w.job || s.from != w.from || s.to != w.to {
				t.Fatalf("event %d = %s %s→%s, want %s %s→%s", i, s.job, s.from, s.to, w.job, w.from, w.to)
			}
		case err := <-followErr:
			t.Fatalf("follow ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatalf("event %d (%s %s→%s) never came", i, w.job, w.from, w.to)
		}
	}
	// Resuming from the last cursor yields nothing more for these jobs.
	for ev, err := range c.Events(ctx, jobs.EventOptions{Since: last}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == "transition" && (ev.JobID == first.ID || ev.JobID == second.ID) {
			t.Errorf("event %d repeated after cursor %d: %+v", ev.ID, last, ev)
		}
	}
}

func TestWaitIdleNamesTheJob(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "echo once; exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, j.ID, 0)
	res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Idle: 300 * time.Millisecond, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != jobs.WaitIdle || res.JobID != j.ID {
		t.Errorf("wait --idle: reason %s, job %q; want idle, %s", res.Reason, res.JobID, j.ID)
	}
}

// hookState says where a job and its on_exit hook stand: its status, its
// transitions and hook events, and what the hook's file holds.
func hookState(ctx context.Context, c *jobs.Client, id, file string) string {
	var b strings.Builder
	if j, err := c.Get(ctx, id); err == nil {
		fmt.Fprintf(&b, "status %s\n", j.Status)
	}
	h, err := c.History(ctx, id)
	if err != nil {
		fmt.Fprintf(&b, "history: %v\n", err)
	}
	for _, e := range h {
		fmt.Fprintf(&b, "%s %s %s %s\n", e.At.Format(time.RFC3339Nano), e.Kind, e.To, e.Detail)
	}
	fmt.Fprintf(&b, "hook file: %q", file)
	return b.String()
}
