package protocol

import (
	"os"
	"path/filepath"
	"testing"
)

// A listener whose socket was removed and made again by someone else at
// the same path leaves that socket alone when it closes; one whose socket
// is still there removes it.
func TestListenerRemovesOnlyItsOwnSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "jl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "default.sock")
	old, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if old.Gone() {
		t.Fatal("a fresh listener reports its socket gone")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !old.Gone() {
		t.Fatal("a removed socket is not reported gone")
	}
	newer, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("closing the old listener removed the newer socket: %v", err)
	}
	newer.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("closing the newer listener left its socket: %v", err)
	}
}

// RemoveLockFile removes only the lock file it holds.
func TestRemoveLockFileOnlyItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	g, err := LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	RemoveLockFile(path, f)
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("another lock file was removed: %v", err)
	}
	RemoveLockFile(path, g)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("its own lock file stayed: %v", err)
	}
}
