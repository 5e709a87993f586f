package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
)

// inotifyOpen counts the inotify instances this process holds.
func inotifyOpen(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(link, "inotify") {
			n++
		}
	}
	return n
}

// TestWatcherShortWaitsDoNotWatch: waits shorter than quickFor in all
// sleep in slices without an inotify watch, whose release costs the kernel a grace
// period (see watcher); a longer one watches, and a write to the database
// wakes it.
func TestWatcherShortWaitsDoNotWatch(t *testing.T) {
	// Not parallel: it counts the process's inotify instances.
	dbPath := filepath.Join(t.TempDir(), "jobs.db")
	if err := os.WriteFile(dbPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := inotifyOpen(t)
	ctx := context.Background()
	w := newWatcher(dbPath)
	defer w.Close()
	for range 5 {
		if err := w.Wait(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if n := inotifyOpen(t); n != held {
			t.Fatalf("after %s of waiting the process holds %d inotify instances, %d before", w.waited, n, held)
		}
	}
	// Past quickFor, a wait arms the watch.
	deadline := time.Now().Add(testwait.Least)
	for inotifyOpen(t) == held {
		if time.Now().After(deadline) {
			t.Fatalf("no inotify watch after %s of waiting", w.waited)
		}
		if err := w.Wait(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if w.waited < quickFor {
		t.Fatalf("watching after %s of waiting, before %s", w.waited, quickFor)
	}
	woke := make(chan error, 1)
	go func() { woke <- w.Wait(ctx, time.Hour) }()
	// Written until the wait returns: a write before the wait has polled
	// is seen as well, by the watch that is already armed.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-woke:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-tick.C:
			if err := os.WriteFile(dbPath+"-wal", []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("a write to the database did not end the wait")
		}
	}
}

// TestWatcherCloseAfterContextEnd: a wait that ends with its context
// (a caller's timeout) leaves nothing behind that touches the watcher: the
// watch's wake-up on the context's end ran on its own goroutine and read
// the watcher's file while Close, right after the wait, cleared it (a
// data race the race detector reported in a wait's test).
func TestWatcherCloseAfterContextEnd(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "jobs.db")
	if err := os.WriteFile(dbPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		w := newWatcher(dbPath)
		if !w.arm() {
			t.Fatal("no inotify watch")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		// Ends at the context's deadline, by the read's deadline (nil) or
		// by the context (its error): either way it has ended.
		_ = w.Wait(ctx, time.Hour)
		w.Close()
		cancel()
	}
}
