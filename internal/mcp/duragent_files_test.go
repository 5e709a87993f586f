package mcp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestDuragentFilesRestore: a server that starts finds the meta files of
// its scope in the directory and brings them up to date (a process that
// ended while no server ran reads completed, its log whole); it leaves
// another scope's files alone, and removes the files of a job that is gone.
func TestDuragentFilesRestore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	open := func(scope string) *jobs.Client {
		c, err := jobs.Open(t.Context(), jobs.Options{DB: db, Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	mine, theirs := open("a"), open("b")
	t.Setenv(EnvDuragentDir, dir)
	first := newDuragentFiles(mine)
	other := newDuragentFiles(theirs)
	if first == nil || other == nil {
		t.Fatal("no files mirror")
	}

	// A process that waits for a line, mirrored while it waits; then the
	// mirror stops (the server exits) and the process ends.
	j, err := mine.Start(t.Context(), jobs.Spec{Command: "echo before; read x; echo after"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := mine.Start(t.Context(), jobs.Spec{Command: "echo gone"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, mine, gone.ID)
	foreign, err := theirs.Start(t.Context(), jobs.Spec{Command: "echo foreign"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, theirs, foreign.ID)
	for _, id := range []string{j.ID, gone.ID} {
		first.add(t.Context(), id)
	}
	other.add(t.Context(), foreign.ID)
	log, meta := first.paths(j.ID)
	waitFor(t, "the first line in the log", 30*time.Second, func() bool {
		b, _ := os.ReadFile(log)
		return string(b) == "before\n"
	})
	first.m.close()
	other.m.close()
	if m := readMeta(t, meta); m.Status != "running" || m.Session != "a" || m.LogFile != log {
		t.Errorf("meta while running: %+v", m)
	}

	if _, err := mine.Write(t.Context(), j.ID, []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	waitJob(t, mine, j.ID)
	if _, err := mine.Remove(t.Context(), gone.ID); err != nil {
		t.Fatal(err)
	}
	foreignLog, foreignMeta := other.paths(foreign.ID)
	before, err := os.ReadFile(foreignMeta)
	if err != nil {
		t.Fatal(err)
	}

	// The next server of scope a.
	next := newDuragentFiles(mine)
	t.Cleanup(next.m.close)
	next.restore(t.Context())
	if m := readMeta(t, meta); m.Status != "completed" || m.ExitCode == nil || *m.ExitCode != 0 || m.EndedAt == nil {
		t.Errorf("meta after restore: %+v, want completed with exit code 0", m)
	}
	if b, _ := os.ReadFile(log); string(b) != "before\nafter\n" {
		t.Errorf("log after restore: %q", b)
	}
	goneLog, goneMeta := next.paths(gone.ID)
	for _, p := range []string{goneLog, goneMeta} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of a removed job: %v, want gone", filepath.Base(p), err)
		}
	}
	if after, err := os.ReadFile(foreignMeta); err != nil || string(after) != string(before) {
		t.Errorf("another scope's meta changed: %v\n%s\n%s", err, before, after)
	}
	if _, err := os.Stat(foreignLog); err != nil {
		t.Errorf("another scope's log: %v", err)
	}
	if next.mirrored(foreign.ID) {
		t.Error("another scope's job is mirrored")
	}
}

func readMeta(t *testing.T, path string) duragentMeta {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m duragentMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}
