//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A database on read-only media is opened read-only by itself: reads work,
// nothing is created beside it.
func TestReadOnlyMediaIsReadWithoutFlag(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a directory read-only")
	}
	w := newWorld(t)
	id := w.start("--", "echo", "from the archive")
	w.ok("wait", id)
	w.stop()
	dir := filepath.Join(w.base, "media")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// This host's name: what opens it read-only is the mount alone.
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	copyAsHost(t, w.dbPath(), filepath.Join(dir, "jobs.db"), host)
	ro := filepath.Join(w.base, "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount refused: %v", err)
	}
	defer syscall.Unmount(ro, syscall.MNT_DETACH)
	if err := syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("read-only remount refused: %v", err)
	}
	path := filepath.Join(ro, "jobs.db")
	before := fileSums(t, path)
	if out := w.ok("--db", path, "log", id); !strings.Contains(out, "from the archive") {
		t.Errorf("log on read-only media: %q", out)
	}
	w.ok("--db", path, "list", "--all-scopes")
	if got := fileSums(t, path); got != before {
		t.Fatalf("the file changed: %v, was %v", got, before)
	}
	ents, _ := os.ReadDir(ro)
	if len(ents) != 1 {
		t.Errorf("files beside the database on read-only media: %d, want 1", len(ents))
	}
	t.Logf("FLEET-FIGURE %s", "database on a read-only mount: list and log work without --read-only, file unchanged")
}
