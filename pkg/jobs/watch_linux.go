package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/privfile"
)

// watcher sleeps until the database changes. For its first second of
// waiting it sleeps in short slices (up to quickTick) and lets its caller
// look again after each; after that it watches the database's directory with
// inotify, so a long wait costs nothing while nothing is written. A timer
// bounds each sleep so conditions that need no write (an idle period, a
// dead supervisor) are still noticed.
//
// Why not inotify from the start: releasing an inotify watch waits for a
// grace period in the kernel (fsnotify's SRCU), whether the watch is
// closed or its process exits with it, which is most of a `jobs start
// --wait` of a job that ends at once. Short waits never watch; long ones
// pay it once, at the end of a wait of a second or more.
type watcher struct {
	dir, base string
	fd        int           // the inotify instance once armed, else -1
	failed    bool          // inotify is not available: sleep in slices
	waited    time.Duration // time spent in quick slices
	status    bool          // wake for status changes only (watchStatus)
}

// watchStatus makes w wake only when a job's status may have changed (the
// database's status mark moved, see db.StatusMarkSuffix), not on every
// write: a wait for jobs to end sleeps through another job's output.
func (w *watcher) watchStatus() { w.status = true }

const (
	// quickFor is how long a watcher sleeps in quick slices before it
	// watches with inotify.
	quickFor = time.Second
	// quickTick is the longest quick slice: the latency of a short wait,
	// for a read of the database by the caller each slice.
	quickTick = 10 * time.Millisecond
)

func newWatcher(dbPath string) *watcher {
	return &watcher{fd: -1, dir: filepath.Dir(dbPath), base: filepath.Base(dbPath)}
}

// watchNow skips the quick slices: for a caller whose every look costs a
// query, and which waits long anyway.
func (w *watcher) watchNow() { w.waited = quickFor }

// arm starts watching the directory. It reports false when inotify is not
// available.
func (w *watcher) arm() bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return false
	}
	if w.status {
		// The mark alone, not the directory: the directory's events
		// come with every write to the WAL, and reading them is the
		// cost this avoids. The mark is made if no status changed yet.
		// Made, and watched, never through a symlink (privfile).
		mark := filepath.Join(w.dir, w.base+db.StatusMarkSuffix)
		if f, err := privfile.Open("status mark", mark, os.O_WRONLY|os.O_CREATE); err == nil {
			f.Close()
			if _, err := unix.InotifyAddWatch(fd, mark, unix.IN_ATTRIB|unix.IN_MODIFY|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_DONT_FOLLOW); err == nil {
				w.fd = fd
				return true
			}
		}
	}
	if _, err := unix.InotifyAddWatch(fd, w.dir, unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return false
	}
	w.fd = fd
	return true
}

// Wait returns when the database may have changed, after at most d, or
// with ctx's error.
func (w *watcher) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if w.fd < 0 && !w.failed && w.waited >= quickFor {
		if w.arm() {
			// Armed now: a change since the caller last looked would
			// not show, so it looks once more before the first wait.
			return nil
		}
		w.failed = true
	}
	if w.fd < 0 {
		// Quick slices double from 1 ms up to quickTick: a job that ends
		// within milliseconds is seen within about as long again.
		slice := min(max(w.waited, time.Millisecond), quickTick)
		if w.failed {
			slice = 100 * time.Millisecond
		}
		slice = min(slice, time.Until(deadline))
		w.waited += slice
		t := time.NewTimer(max(slice, 0))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	buf := make([]byte, 4096)
	for {
		// Poll in slices of at most 250 ms so a cancelled context is seen.
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		ms := int(min(left, 250*time.Millisecond) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, max(ms, 1))
		if err := ctx.Err(); err != nil {
			return err
		}
		if err != nil && err != unix.EINTR {
			return nil
		}
		if n == 0 {
			continue
		}
		changed := false
		for {
			m, err := unix.Read(w.fd, buf)
			if err != nil || m <= 0 {
				break
			}
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
				nameLen := int(ev.Len)
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen]), "\x00")
				if w.status || strings.HasPrefix(name, w.base) {
					changed = true
				}
				off += unix.SizeofInotifyEvent + nameLen
			}
		}
		if changed {
			return nil
		}
	}
}

// Close releases the watch.
func (w *watcher) Close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
