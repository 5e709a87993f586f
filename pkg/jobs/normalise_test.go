package jobs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestStartNormalises: the package is where a start request is resolved
// and checked, whichever front end made it. A relative directory is
// resolved against the caller's, a missing one is refused before any job
// exists, and an environment name no shell can pass on is ErrInvalid.
func TestStartNormalises(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	j, err := c.Start(ctx, jobs.Spec{Command: "pwd", Cwd: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "sub"); j.Cwd != want {
		t.Errorf("cwd recorded as %q, want %q", j.Cwd, want)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Log(ctx, j.ID, jobs.Range{}); err != nil || strings.TrimSpace(out.Text) != filepath.Join(base, "sub") {
		t.Errorf("the job ran in %q (%v), want %q", out.Text, err, filepath.Join(base, "sub"))
	}

	before, err := c.List(ctx, jobs.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "true", Cwd: "no-such-dir"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing directory: %v", err)
	}
	for _, kv := range []string{"1X=a", "A B=c", "NOEQUALS", "=v", "X=a\x00b"} {
		if _, err := c.Start(ctx, jobs.Spec{Command: "true", Env: []string{kv}}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("env %q: %v, want ErrInvalid", kv, err)
		}
	}
	for _, spec := range []jobs.Spec{
		{Command: "true", TimeoutGrace: -time.Second},
		{Command: "true", Tmux: true, TmuxPrefix: "a:b"},
		{Command: "true", Tmux: true, TmuxPrefix: strings.Repeat("x", jobs.MaxTmuxPrefix+1)},
	} {
		if _, err := c.Start(ctx, spec); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("grace %s, tmux prefix %q: %v, want ErrInvalid", spec.TimeoutGrace, spec.TmuxPrefix, err)
		}
	}
	after, err := c.List(ctx, jobs.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused starts left %d jobs behind", len(after)-len(before))
	}
}

// TestKillNoGrace: NoGrace sends SIGKILL right after SIGTERM, so a job
// that ignores SIGTERM still ends at once, escalated; 0 is the default
// grace, which that job sits out.
func TestKillNoGrace(t *testing.T) {
	c := open(t, jobs.Options{Grace: time.Minute})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `trap '' TERM; echo ready; sleep 60`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: "ready", Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx30, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := c.Kill(ctx30, j.ID, jobs.NoGrace)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Escalated || r.Status != jobs.StatusKilled || len(r.Survivors) != 0 {
		t.Errorf("kill with no grace: %+v, want escalated, killed, no survivors", r)
	}
}
