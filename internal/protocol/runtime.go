package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/proc"
)

// maxSocketDir bounds the runtime directory's length so that
// <dir>/<id>.sock fits in a unix socket address (sun_path is 104 bytes on
// darwin, 108 on Linux, including the terminating NUL).
const maxSocketDir = 100 - len("/abcdefghijklm.sock")

// DefaultRuntimeDir returns the runtime directory of the database at
// dbPath: $XDG_RUNTIME_DIR/jobs/<hash>, else <db dir>/run/<hash>, where
// <hash> is a short hash of the absolute database path, so that two
// databases never share a default.sock. When that path is too long for a
// unix socket address it falls back to $TMPDIR/jobs-<uid>/<hash>.
func DefaultRuntimeDir(dbPath string) string {
	return RuntimeDirFor(os.Getenv("XDG_RUNTIME_DIR"), dbPath)
}

// RuntimeDirFor is DefaultRuntimeDir with xdgRuntimeDir standing for
// $XDG_RUNTIME_DIR: what a process with that environment would use.
func RuntimeDirFor(xdgRuntimeDir, dbPath string) string {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		abs = dbPath
	}
	sum := sha256.Sum256([]byte(abs))
	hash := hex.EncodeToString(sum[:8])
	var dir string
	if x := xdgRuntimeDir; x != "" && filepath.IsAbs(x) {
		dir = filepath.Join(x, "jobs", hash)
	} else {
		dir = filepath.Join(filepath.Dir(abs), "run", hash)
	}
	if len(dir) > maxSocketDir {
		dir = filepath.Join(os.TempDir(), "jobs-"+strconv.Itoa(os.Geteuid()), hash)
	}
	return dir
}

// PrepareRuntimeDir creates dir (0700) and checks that it is a real
// directory owned by us and private: the sockets in it accept commands that
// run programs, so a directory another user can enter or swap for a
// symlink would hand them our jobs. The parent is checked too when it is
// one of ours ("jobs", "jobs-<uid>").
func PrepareRuntimeDir(dir string) error {
	if len(dir) > maxSocketDir {
		return fmt.Errorf("prepare runtime directory %s: path too long for a unix socket", dir)
	}
	// Create and check one level at a time: MkdirAll would follow a
	// symlink planted at the parent and create our directory wherever it
	// points before any check could see it.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(filepath.Dir(parent), 0o700); err != nil {
		return fmt.Errorf("prepare runtime directory: %w", err)
	}
	for _, d := range []string{parent, dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("prepare runtime directory: %w", err)
		}
		if err := securePrivateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// checkRuntimeDir checks, without creating anything, that the runtime
// directory and its parent are not symlinks and are ours where they exist.
func checkRuntimeDir(dir string) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("runtime directory %s is a symlink: refusing it", d)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("runtime directory %s is owned by uid %d, not by us: refusing it", d, st.Uid)
		}
	}
	return nil
}

// checkSocket refuses to talk to anything at path but a unix socket of
// ours in a private directory of ours: a symlink or a socket planted by
// someone else would receive our start requests, environment included.
func checkSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if err := ourSocket(path, fi, ""); err != nil {
		return err
	}
	di, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return err
	}
	if !di.IsDir() || di.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("socket directory %s is not private (mode %v): refusing it", filepath.Dir(path), di.Mode())
	}
	if st, ok := di.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by us: refusing it", filepath.Dir(path), st.Uid)
	}
	return nil
}

// checkLock checks, without creating anything, that a lock file is
// absent or a regular file of ours: a symlink there would have us create
// or lock a file wherever it points, and a planted file would be locked
// by its owner at will.
func checkLock(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return lockFileOK(path, fi)
}

func lockFileOK(path string, fi os.FileInfo) error { return privfile.Check("lock file", path, fi) }

// SupervisorLogName is the file in the runtime directory that receives
// the output of the supervisors EnsureDefault starts: refusals, idle exits,
// errors that have no caller to go to.
const SupervisorLogName = "supervise.log"

// maxSupervisorLog bounds the log: a file past it is emptied when the next
// supervisor starts.
const maxSupervisorLog = 1 << 20

// openSupervisorLog opens the supervisors' log for appending, creating it
// 0600. Like the lock, it must be a regular file of ours: a symlink there
// would have the supervisor write wherever it points.
func openSupervisorLog(path string) (*os.File, error) {
	f, err := privfile.Open("log file", path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > maxSupervisorLog {
		_ = f.Truncate(0)
	}
	return f, nil
}

// RemoveStaleSocket removes what a dead supervisor left at path, and only
// a socket of ours: a regular file, a symlink or another user's socket
// there is not ours to unlink.
func RemoveStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := ourSocket(path, fi, ": refusing to replace it"); err != nil {
		return err
	}
	return os.Remove(path)
}

// ourSocket refuses fi (what Lstat said of path) unless it is a unix
// socket of our uid; notSocket ends the message for anything else.
func ourSocket(path string, fi os.FileInfo, notSocket string) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("socket %s is a symlink: refusing it", path)
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%s is not a socket%s", path, notSocket)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket %s is owned by uid %d, not by us: refusing it", path, st.Uid)
	}
	return nil
}

func securePrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("prepare runtime directory: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("prepare runtime directory %s: is a symlink", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("prepare runtime directory %s: not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("prepare runtime directory %s: owned by uid %d, not by us", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("prepare runtime directory: %w", err)
		}
	}
	return nil
}

// ErrLocked means another process holds the lock.
var ErrLocked = errors.New("lock is held by another process")

// LockFile opens (creating 0600) and exclusively flocks path without
// waiting. The lock lives as long as the returned file stays open; the
// kernel drops it when the process dies, however it dies, which is what
// makes a free lock proof of a dead supervisor.
func LockFile(path string) (*os.File, error) {
	// Checked on the open file, so that nothing can be swapped in
	// between the check and the lock.
	f, err := privfile.Open("lock file", path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The pid is for people looking at the directory; nothing reads it.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// SupervisorAlive reports whether sup still runs, by trying its lock: a
// lock nobody holds (or a missing lock file, or a recorded end) means it
// died. A supervisor on another host, or a lock that cannot be checked, is
// assumed alive: its jobs are never declared lost on a guess.
func SupervisorAlive(sup db.Supervisor) bool {
	if sup.EndedAt != nil {
		return false
	}
	if host, err := os.Hostname(); err == nil && sup.Host != "" && sup.Host != host {
		return true
	}
	if sup.LockPath == "" {
		return false
	}
	held, err := lockHeld(sup.LockPath)
	if errors.Is(err, os.ErrNotExist) {
		return lockRemovedAlive(sup)
	}
	return held || err != nil
}

// lockHeld reports whether a process holds the lock file at path (taken
// with LockFile). A shared lock conflicts with the holder's exclusive one
// but not with other processes checking at the same moment.
func lockHeld(path string) (bool, error) {
	f, err := privfile.Open("lock file", path, os.O_RDONLY)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, nil
	}
	return true, nil
}

// lockRemovedAlive decides about a supervisor whose lock file is missing
// while its row says it has not ended. A supervisor that ends records its
// end before it removes its lock, so this is either one whose runtime
// directory was wiped under it (it makes its lock again within a second,
// see the supervisor's keepAddresses) or one that died and whose directory
// was wiped since. The first is still its process: the recorded pid, alive,
// started before the row was written. A pid that is gone, dead, or started
// after the row (reused) is the second.
func lockRemovedAlive(sup db.Supervisor) bool {
	info, err := proc.Inspect(sup.PID)
	if err != nil || info.Dead() {
		return false
	}
	age, ok := proc.Since(info.StartTime)
	if !ok {
		return true // cannot tell: never declared dead on a guess
	}
	// The row is written after the process started; a process younger
	// than the row by more than the slack reused the pid.
	const slack = 2 * time.Second
	return age+slack >= time.Since(sup.StartedAt)
}

// Listener is a unix socket listener that unlinks its path on Close only
// while the path still names the socket it created. Go's own unix
// listener unlinks the path whatever is there by then: after the runtime
// directory was wiped and a newer supervisor listened at the same path,
// an older supervisor's exit removed the newer one's socket, and clients
// found nobody to talk to until the newer one exited.
type Listener struct {
	*net.UnixListener
	path string
	made os.FileInfo // what Lstat said of path once we listened
}

// Listen listens on a new unix socket at path, mode 0600.
func Listen(path string) (*Listener, error) {
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ul.SetUnlinkOnClose(false)
	l := &Listener{UnixListener: ul, path: path}
	// The directory is 0700 already; the mode is a second fence.
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		os.Remove(path)
		return nil, fmt.Errorf("listen: %w", err)
	}
	if l.made, err = os.Lstat(path); err != nil {
		ul.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return l, nil
}

// Path returns the path the listener was created at.
func (l *Listener) Path() string { return l.path }

// Gone reports whether path no longer names the socket l created: it was
// removed, or another file (another supervisor's socket) is there now.
// An error of Lstat other than "not there" proves nothing and reports
// false.
func (l *Listener) Gone() bool {
	fi, err := os.Lstat(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && !os.SameFile(fi, l.made)
}

// Retire turns clients away from l while it answers those that reached
// it already: its path is removed (if it still names l's socket), so no
// new connection arrives, and Accept goes on returning the connections
// made before, then, after grace, fails with os.ErrDeadlineExceeded, when
// the acceptor closes l. Closing it at once would drop the connections
// the kernel had queued and not yet handed to Accept: their clients read
// EOF without an answer.
func (l *Listener) Retire(grace time.Duration) {
	if l.made != nil && !l.Gone() {
		_ = os.Remove(l.path)
	}
	_ = l.SetDeadline(time.Now().Add(grace))
}

// Close stops listening and removes the socket, if path still names it.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if l.made != nil && !l.Gone() {
		_ = os.Remove(l.path)
	}
	return err
}

// Holds reports whether path still names the file f has open (a lock
// taken with LockFile): false once it was removed or replaced.
func Holds(path string, f *os.File) bool {
	mine, err := f.Stat()
	if err != nil {
		return false
	}
	fi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, mine)
}

// RemoveLockFile removes path if it still names the file f has open, and
// nothing else: a lock file another supervisor created at the same path
// (after the directory was wiped) is not ours to remove.
func RemoveLockFile(path string, f *os.File) {
	if Holds(path, f) {
		_ = os.Remove(path)
	}
}
