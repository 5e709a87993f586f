package protocol

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// A retired listener turns new clients away but still hands Accept the
// connections the kernel queued before, which Close would drop (their
// clients would read EOF without an answer); after its grace, Accept
// fails with os.ErrDeadlineExceeded.
func TestRetiredListenerAnswersThoseQueued(t *testing.T) {
	for _, retire := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "default.sock")
		l, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		// Connected, not yet accepted: in the listen queue.
		var queued []net.Conn
		for range 3 {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			queued = append(queued, c)
		}
		if !retire {
			l.Close()
			for _, c := range queued {
				c.SetReadDeadline(time.Now().Add(time.Minute))
				if _, err := c.Read(make([]byte, 1)); err == nil {
					t.Fatal("a queued connection read from a closed listener")
				}
			}
			continue
		}
		l.Retire(time.Minute)
		if _, err := net.Dial("unix", path); err == nil {
			t.Error("a client reached a retired listener")
		}
		for i, c := range queued {
			s, err := l.Accept()
			if err != nil {
				t.Fatalf("accept queued connection %d: %v", i, err)
			}
			go func() {
				s.Write([]byte("answer"))
				s.Close()
			}()
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if b, err := io.ReadAll(c); string(b) != "answer" {
				t.Errorf("queued connection %d read %q, %v", i, b, err)
			}
		}
		l.SetDeadline(time.Now())
		if _, err := l.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("accept after the grace: %v, want os.ErrDeadlineExceeded", err)
		}
		l.Close()
	}
}
