package jobs

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// watcher sleeps until the database changes. On Linux it watches the
// database's directory with inotify, so a waiting reader costs nothing
// while nothing is written; a timer bounds each sleep so conditions that
// need no write (an idle period, a dead supervisor) are still noticed.
type watcher struct {
	fd   int
	base string
}

func newWatcher(dbPath string) *watcher {
	w := &watcher{fd: -1, base: filepath.Base(dbPath)}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return w
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(dbPath), unix.IN_MODIFY|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return w
	}
	w.fd = fd
	return w
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
	if w.fd < 0 {
		t := time.NewTimer(min(d, 100*time.Millisecond))
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
				if strings.HasPrefix(name, w.base) {
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
