package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/privfile"
)

// watcher sleeps until the database changes. For its first second of
// waiting it sleeps in short slices (up to quickTick) and looks, after each,
// whether the files it watches moved (a stat of each, no query); after that
// it watches with inotify, its instance in the Go runtime's poller, so a
// long wait costs nothing while nothing is written: the process sleeps
// until an event, the caller's bound or the context's end. A bound on each
// sleep lets the caller notice what no write shows (an idle period, a dead
// supervisor).
//
// Why not inotify from the start: releasing an inotify watch waits for a
// grace period in the kernel (fsnotify's SRCU), whether the watch is
// closed or its process exits with it, which is most of a `jobs start
// --wait` of a job that ends at once. Short waits never watch; long ones
// pay it once, at the end of a wait of a second or more.
//
// A caller that watches every write (not watchStatus) says after each
// look whether it found anything for itself (Looked): while it keeps
// finding nothing, another job's output is what wakes it, and the watcher
// lets such writes wake it at most once per backoff gap, doubling up to
// backoffMax. Writes meanwhile stay queued in the kernel, so the next look
// sees them; a follower of a quiet job then looks about once a second
// during another job's flood instead of after every one of its commits.
type watcher struct {
	dir, base string
	f         *os.File      // the inotify instance once armed, in the runtime's poller
	fd        int           // f's descriptor (f.Fd would make it blocking)
	failed    bool          // inotify is not available: sleep in slices
	waited    time.Duration // time spent in quick slices
	status    bool          // wake for status changes only (watchStatus)
	seen      fileMark      // the watched files when the caller last looked
	fruitless int           // looks in a row that found nothing (Looked)
	returned  time.Time     // when Wait last returned
}

// fileMark is what a stat tells of the watched files: enough to see that
// one of them was written since.
type fileMark struct {
	ino, size       uint64
	mtime, ctime    int64
	walSize         uint64
	walMtime, walCt int64
}

// watchStatus makes w wake only when a job's status may have changed (the
// database's status mark moved, see db.StatusMarkSuffix), not on every
// write: a wait for jobs to end sleeps through another job's output.
func (w *watcher) watchStatus() {
	w.status = true
	w.seen = w.mark()
}

const (
	// quickFor is how long a watcher sleeps in quick slices before it
	// watches with inotify.
	quickFor = time.Second
	// quickTick is the longest quick slice: the latency of a short wait.
	quickTick = 10 * time.Millisecond
	// backoffMin and backoffMax bound the gap between wakes by writes
	// that a caller watching every write keeps finding nothing in.
	backoffMin = 20 * time.Millisecond
	backoffMax = time.Second
)

// newWatcher returns a watcher of the database at dbPath. Make it before
// the first look at the database: a write after that look wakes it.
func newWatcher(dbPath string) *watcher {
	w := &watcher{dir: filepath.Dir(dbPath), base: filepath.Base(dbPath)}
	w.seen = w.mark()
	return w
}

// watchNow skips the quick slices: for a caller that waits long anyway.
func (w *watcher) watchNow() { w.waited = quickFor }

// Looked tells w whether the caller's last look found anything new for it
// (see watcher): while it finds nothing, writes wake it less often.
func (w *watcher) Looked(found bool) {
	if found {
		w.fruitless = 0
	} else if w.fruitless < 16 {
		w.fruitless++
	}
}

// mark stats the files a write the caller waits for moves: the status mark
// alone for watchStatus, else the database file and its WAL.
func (w *watcher) mark() fileMark {
	var m fileMark
	var st unix.Stat_t
	if w.status {
		if unix.Stat(filepath.Join(w.dir, w.base+db.StatusMarkSuffix), &st) == nil {
			m.ino, m.size, m.mtime, m.ctime = st.Ino, uint64(st.Size), st.Mtim.Nano(), st.Ctim.Nano()
		}
		return m
	}
	if unix.Stat(filepath.Join(w.dir, w.base), &st) == nil {
		m.ino, m.size, m.mtime, m.ctime = st.Ino, uint64(st.Size), st.Mtim.Nano(), st.Ctim.Nano()
	}
	if unix.Stat(filepath.Join(w.dir, w.base+"-wal"), &st) == nil {
		m.walSize, m.walMtime, m.walCt = uint64(st.Size), st.Mtim.Nano(), st.Ctim.Nano()
	}
	return m
}

// arm starts watching: the status mark with watchStatus, else the
// database's directory. It reports false when inotify is not available.
func (w *watcher) arm() bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return false
	}
	watched := false
	if w.status {
		// The mark alone, not the directory: the directory's events
		// come with every write to the WAL, and reading them is the
		// cost this avoids. The mark is made if no status changed yet.
		// Made, and watched, never through a symlink (privfile).
		mark := filepath.Join(w.dir, w.base+db.StatusMarkSuffix)
		if f, err := privfile.Open("status mark", mark, os.O_WRONLY|os.O_CREATE); err == nil {
			f.Close()
			_, err := unix.InotifyAddWatch(fd, mark, unix.IN_ATTRIB|unix.IN_MODIFY|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_DONT_FOLLOW)
			watched = err == nil
		}
	}
	if !watched {
		if _, err := unix.InotifyAddWatch(fd, w.dir, unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
			unix.Close(fd)
			return false
		}
	}
	// A non-blocking descriptor joins the runtime's poller: a read waits
	// there, with a deadline, and no thread or timer ticks meanwhile.
	f := os.NewFile(uintptr(fd), "inotify")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return false
	}
	w.f, w.fd = f, fd
	return true
}

// Wait returns when the database may have changed, after at most d, or
// with ctx's error.
func (w *watcher) Wait(ctx context.Context, d time.Duration) error {

	err := w.wait(ctx, d)
	w.returned = time.Now()
	if w.f == nil {
		w.seen = w.mark()
	}
	return err
}

func (w *watcher) wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		if !time.Now().Before(dl) {
			// Past the context's deadline, its timer about to fire:
			// returning before it does would have the caller look
			// again and again meanwhile.
			<-ctx.Done()
			return ctx.Err()
		}
		deadline = dl
	}
	if !w.status && w.fruitless > 0 && !w.returned.IsZero() {
		// Writes that the caller found nothing in: let the next one
		// wake it only after the gap (see watcher).
		gap := min(backoffMin<<(w.fruitless-1), backoffMax)
		until := w.returned.Add(gap)
		if deadline.Before(until) {
			until = deadline
		}
		if err := sleepUntil(ctx, until); err != nil {
			return err
		}
		if !time.Now().Before(deadline) {
			return nil
		}
	}
	for w.f == nil {
		if w.mark() != w.seen {
			return nil
		}
		if !w.failed && w.waited >= quickFor {
			if w.arm() {
				// Armed now: a change since the last stat would not
				// show, so the caller looks once more before the
				// first wait.
				return nil
			}
			w.failed = true
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		// Quick slices double from 1 ms up to quickTick: a job that ends
		// within milliseconds is seen within about as long again.
		slice := min(max(w.waited, time.Millisecond), quickTick)
		if w.failed {
			slice = 100 * time.Millisecond
		}
		slice = min(slice, time.Until(deadline))
		w.waited += slice
		if err := sleepUntil(ctx, time.Now().Add(slice)); err != nil {
			return err
		}
	}
	// The wake-up on ctx's end runs on a goroutine of its own, which stop
	// does not wait for: it holds the file, not the watcher, whose file
	// Close or broken may clear meanwhile.
	f := w.f
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := w.f.SetReadDeadline(deadline); err != nil {
		return w.broken()
	}
	buf := make([]byte, 4096)
	for {
		n, err := w.f.Read(buf)
		if err := ctx.Err(); err != nil {
			return err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil || n <= 0 {
			return w.broken()
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
			nameLen := int(ev.Len)
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen]), "\x00")
			if w.status || ev.Mask&unix.IN_Q_OVERFLOW != 0 || strings.HasPrefix(name, w.base) {
				// Read on to the end of the queue first: the events
				// queued behind this one are of the same change.
				w.drain(buf)
				return nil
			}
			off += unix.SizeofInotifyEvent + nameLen
		}
	}
}

// drain reads the events queued without waiting.
func (w *watcher) drain(buf []byte) {
	for {
		if m, err := unix.Read(w.fd, buf); err != nil || m <= 0 {
			return
		}
	}
}

// broken gives up the watch after an error reading it: the watcher sleeps
// in slices from now on. The caller looks once more.
func (w *watcher) broken() error {
	w.f.Close()
	w.f = nil
	w.failed = true
	w.seen = w.mark()
	return nil
}

// sleepUntil sleeps until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// Close releases the watch.
func (w *watcher) Close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
