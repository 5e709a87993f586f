package jobs_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestReadsOfDamagedOutputWriteNothing: every read of a job's output that
// meets a damaged page returns a *CorruptError and leaves the file as it
// was, although a read of that finished job has writes due (its access
// for the TTL, the record that its processes are gone), which a read that
// succeeds makes.
func TestReadsOfDamagedOutputWriteNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := open(t, jobs.Options{DB: path})
	j, err := c.Start(ctx, jobs.Spec{Command: "seq 1 20000", NoStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close() // its supervisor ends; the last connection folds the WAL in

	// The writes a read makes are due, then the root page of the output
	// table is overwritten.
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, `UPDATE jobs SET last_access_at = '2000-01-01T00:00:00.000Z', survivors_gone = 0`); err != nil {
		t.Fatal(err)
	}
	var root int64
	if err := d.GetContext(ctx, &root, `SELECT rootpage FROM sqlite_schema WHERE name = 'chunks'`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("the WAL is still there after the last connection closed")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096-8)
	for i := range junk {
		junk[i] = byte(i*131 + 7)
	}
	if _, err := f.WriteAt(junk, (root-1)*4096+8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	damaged, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := func() [32]byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	reads := []struct {
		name string
		do   func(c *jobs.Client) error
	}{
		{"Poll", func(c *jobs.Client) error { _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); return err }},
		{"ReadNew", func(c *jobs.Client) error { _, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{}); return err }},
		{"Log", func(c *jobs.Client) error { _, err := c.Log(ctx, j.ID, jobs.Range{}); return err }},
		{"Log clean", func(c *jobs.Client) error { _, err := c.Log(ctx, j.ID, jobs.Range{Clean: true}); return err }},
		{"Log offset", func(c *jobs.Client) error { _, err := c.Log(ctx, j.ID, jobs.Range{ByteRange: true}); return err }},
		{"Segments", func(c *jobs.Client) error { _, _, err := c.Segments(ctx, j.ID, 0, 0); return err }},
		{"Search", func(c *jobs.Client) error {
			_, err := c.Search(ctx, j.ID, jobs.SearchOptions{Grep: "99"}, func(jobs.Match) error { return nil })
			return err
		}},
	}
	for _, r := range reads {
		// Each read on the damaged file with its writes due.
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		before := sum()
		// A client of its own each, as each CLI verb opens one.
		rc := open(t, jobs.Options{DB: path, Detached: true, Executable: jobsBin, OnlyReads: true})
		err := r.do(rc)
		rc.Close()
		if ce := new(jobs.CorruptError); !errors.As(err, &ce) {
			t.Errorf("%s of the damaged output: %v, want a CorruptError", r.name, err)
		}
		if sum() != before {
			t.Errorf("%s met the damage and changed the file", r.name)
		}
	}
}
