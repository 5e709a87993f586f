package jobs_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// With LazyOpen, Open does not touch the database: the first call that
// needs it reports what Open would have.
func TestLazyOpenReportsDatabaseErrorsOnUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir() // a directory is no database
	_, eager := jobs.Open(ctx, jobs.Options{DB: dir, Detached: true})
	if eager == nil {
		t.Fatal("Open of a directory succeeded")
	}
	c, err := jobs.Open(ctx, jobs.Options{DB: dir, Detached: true, LazyOpen: true})
	if err != nil {
		t.Fatalf("lazy Open: %v", err)
	}
	defer c.Close()
	if c.DBPath() != dir {
		t.Errorf("DBPath = %q, want %q", c.DBPath(), dir)
	}
	if _, err := c.Get(ctx, "x"); err == nil || err.Error() != eager.Error() {
		t.Errorf("Get = %v, want %v", err, eager)
	}
}

// Lazy clients start jobs whether or not a supervisor runs: the first
// starts one (opening the database), the next reach it without.
func TestLazyOpenStarts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	var ids []string
	for i := range 3 {
		c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "test", Detached: true, LazyOpen: true, Executable: jobsBin})
		if err != nil {
			t.Fatal(err)
		}
		j, err := c.Start(ctx, jobs.Spec{Command: "echo lazy"})
		c.Close()
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if j.Status != jobs.StatusRunning && j.Status != jobs.StatusDone {
			t.Errorf("start %d: status %s", i, j.Status)
		}
		ids = append(ids, j.ID)
	}
	c := open(t, jobs.Options{DB: path, Detached: true, LazyOpen: true})
	res, err := c.Wait(ctx, ids, jobs.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		out, err := c.Log(ctx, j.ID, jobs.Range{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != jobs.StatusDone || out.Text != "lazy\n" {
			t.Errorf("job %s: %s %q", j.ID, j.Status, out.Text)
		}
	}
}

// Follow may be a lazy client's first call: it opens the database before
// anything reads it (its watcher is made from the path alone).
func TestLazyOpenFollowFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := open(t, jobs.Options{DB: path})
	j, err := c.Start(ctx, jobs.Spec{Command: "echo followed"})
	if err != nil {
		t.Fatal(err)
	}
	lazy := open(t, jobs.Options{DB: path, Detached: true, LazyOpen: true})
	var out strings.Builder
	if err := lazy.Follow(ctx, j.ID, jobs.Range{ByteRange: true}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "followed\n" {
		t.Errorf("followed %q, want %q", out.String(), "followed\n")
	}
}
