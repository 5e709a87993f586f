package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A read-only open changes nothing: not the mode of a database others can
// read, not its bytes; a write through it fails.
func TestOpenReadOnlyChangesNothing(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	create(t, d, "s", "a")
	path := d.Path
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if !ro.ReadOnly() {
		t.Error("ReadOnly() is false")
	}
	js, err := ro.FindJobs(ctx, Filter{AllScopes: true})
	if err != nil || len(js) != 1 {
		t.Fatalf("FindJobs: %d jobs, %v", len(js), err)
	}
	if err := ro.Touch(ctx, js[0].ID); err == nil {
		t.Error("a write through a read-only open succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Error("the file changed")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %04o, want 0644 left as it was", fi.Mode().Perm())
	}
}

// A read-only open creates no database, and refuses an older schema
// (which only a read-write open would migrate) in words that say so.
func TestOpenReadOnlyRefuses(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := OpenReadOnly(ctx, missing); err == nil {
		t.Error("opened a missing database")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only open created %s", missing)
	}

	d, _ := openTest(t)
	if _, err := d.Exec(`DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err := OpenReadOnly(ctx, d.Path)
	if err == nil || !strings.Contains(err.Error(), "older") {
		t.Errorf("older schema: %v", err)
	}
}

// OpenForReadsHere tells another host's database from this host's.
func TestForeign(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	host, _ := os.Hostname()
	for _, c := range []struct {
		hosts []string
		want  bool
	}{
		{nil, false},
		{[]string{"elsewhere"}, true},
		{[]string{"elsewhere", host}, false},
		{[]string{""}, false},
	} {
		if _, err := d.Exec(`DELETE FROM supervisors`); err != nil {
			t.Fatal(err)
		}
		for i, h := range c.hosts {
			if _, err := d.Exec(`INSERT INTO supervisors (id, pid, host, kind, lock_path, socket_path, version, started_at)
				VALUES (?, 1, ?, 'detached', '', '', 'test', '2025-01-01T00:00:00.000Z')`, "sup"+string(rune('a'+i)), h); err != nil {
				t.Fatal(err)
			}
		}
		// The read open tells it from its look at the file, and opens
		// only a database that is not foreign.
		r, got, err := OpenForReadsHere(ctx, d.Path)
		if err != nil || got != c.want || (r == nil) != c.want {
			t.Errorf("hosts %q: OpenForReadsHere = %v, %v, %v; want a database unless foreign (%v)", c.hosts, r != nil, got, err, c.want)
		}
		if r != nil {
			r.Close()
		}
	}
}
