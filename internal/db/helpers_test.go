package db

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// clock is a fake d.Now: it starts at a fixed time and advances one
// millisecond per call, so that jobs created one after another have
// distinct, ordered creation times.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// TestMain removes the template database after the tests.
func TestMain(m *testing.M) {
	if path := os.Getenv(otherProcessEnv); path != "" {
		os.Exit(otherProcess(path))
	}
	code := m.Run()
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
	os.Exit(code)
}

var (
	templateOnce sync.Once
	templateDir  string
	templateData []byte
	templateErr  error
)

// migratedTemplate returns the bytes of a freshly migrated database. Tests
// start from a copy: migrating costs far more than copying, most of all
// under the race detector.
func migratedTemplate() ([]byte, error) {
	templateOnce.Do(func() {
		templateDir, templateErr = os.MkdirTemp("", "jobs-db-template-")
		if templateErr != nil {
			return
		}
		path := filepath.Join(templateDir, "jobs.db")
		var d *DB
		if d, templateErr = Open(context.Background(), path); templateErr != nil {
			return
		}
		if templateErr = d.Close(); templateErr != nil { // checkpoints the WAL into the file
			return
		}
		templateData, templateErr = os.ReadFile(path)
	})
	return templateData, templateErr
}

// openTest opens a fresh, migrated database in t.TempDir() with a fake
// clock.
func openTest(t *testing.T) (*DB, *clock) {
	t.Helper()
	data, err := migratedTemplate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jobs.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c := &clock{t: epoch}
	d.Now = c.Now
	return d, c
}

// create makes a job in scope with an optional name and no limits.
func create(t *testing.T, d *DB, scope, name string) Job {
	t.Helper()
	j, err := d.CreateJob(context.Background(), NewJob{
		Scope:   scope,
		Name:    name,
		Command: "echo hi",
		Argv:    []string{"/bin/sh", "-c", "echo hi"},
		Cwd:     "/",
	}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// createID makes a job with a chosen id.
func createID(t *testing.T, d *DB, scope, id, name string) Job {
	t.Helper()
	j, err := d.CreateJob(context.Background(), NewJob{ID: id, Scope: scope, Name: name, Command: "true"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// move applies transitions in order and fails the test on any error.
func move(t *testing.T, d *DB, id string, to ...vocab.Status) Job {
	t.Helper()
	var j Job
	for _, s := range to {
		tr := Transition{To: s}
		if s == vocab.StatusRunning {
			tr.PID, tr.PGID, tr.PIDStart = 4242, 4242, 99
		}
		var err error
		if j, err = d.Transition(context.Background(), id, tr); err != nil {
			t.Fatal(err)
		}
	}
	return j
}
