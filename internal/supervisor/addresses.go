package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// addresses is the service that makes the supervisor reachable and
// recognisable as alive: its runtime directory, its lock (held for its
// whole life: a free lock reads as its death to every other process), its
// supervisors row, its own socket and, for the default supervisor,
// default.lock and default.sock. It is started first and stopped last: the
// row records the supervisor's end only once everything else has stopped.
// It only listens; the server accepts on its listeners.
type addresses struct {
	s *Supervisor

	runtimeDir  string
	lockPath    string
	sockPath    string
	defaultSock string

	lock       *os.File // replaced only by keep, which Stop comes after
	registered bool     // the supervisors row exists

	// mu guards the listeners and default.lock once opened: shut,
	// dropDefault and keep give them up or replace them.
	mu              sync.Mutex
	defaultLock     *os.File
	listener        *protocol.Listener // the supervisor's own socket
	defaultListener *protocol.Listener // default.sock (Config.Default)
	retired         *protocol.Listener // default.sock's after dropDefault with a grace
}

func newAddresses(s *Supervisor) *addresses {
	dir := s.cfg.RuntimeDir
	return &addresses{
		s:           s,
		runtimeDir:  dir,
		lockPath:    filepath.Join(dir, s.id+".lock"),
		sockPath:    filepath.Join(dir, s.id+".sock"),
		defaultSock: filepath.Join(dir, "default.sock"),
	}
}

// Start prepares the runtime directory, takes default.lock (Default only;
// vocab.ErrDefaultRunning when taken) and the supervisor's own lock,
// records its supervisors row and listens on its sockets.
func (a *addresses) Start(ctx context.Context) error {
	s := a.s
	if err := protocol.PrepareRuntimeDir(a.runtimeDir); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	if s.cfg.Default {
		f, err := protocol.LockFile(filepath.Join(a.runtimeDir, "default.lock"))
		if errors.Is(err, protocol.ErrLocked) {
			return fmt.Errorf("open supervisor: %w", vocab.ErrDefaultRunning)
		}
		if err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
		a.mu.Lock()
		a.defaultLock = f
		a.mu.Unlock()
	}
	// The lock comes before the row: a row whose lock is free reads as a
	// dead supervisor to every other process.
	lock, err := protocol.LockFile(a.lockPath)
	if err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	a.lock = lock
	host, _ := os.Hostname()
	if err := s.db.CreateSupervisor(ctx, db.Supervisor{
		ID:         s.id,
		PID:        os.Getpid(),
		Host:       host,
		Kind:       s.cfg.Kind,
		LockPath:   a.lockPath,
		SocketPath: a.sockPath,
		Version:    s.cfg.Version,
	}); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	a.registered = true

	l, err := protocol.Listen(a.sockPath)
	if err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	a.mu.Lock()
	a.listener = l
	a.mu.Unlock()
	if s.cfg.Default {
		// We hold default.lock, so a socket of ours left at default.sock
		// belongs to a supervisor that died.
		if err := protocol.RemoveStaleSocket(a.defaultSock); err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
		dl, err := protocol.Listen(a.defaultSock)
		if err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
		a.mu.Lock()
		a.defaultListener = dl
		a.mu.Unlock()
	}
	return nil
}

// Stop gives up the sockets (if shut has not), records the supervisor's
// end and releases its lock.
func (a *addresses) Stop() error {
	a.shut()
	var err error
	if a.registered {
		ctx, cancel := context.WithTimeout(context.Background(), db.FinalWriteTimeout)
		err = a.s.db.EndSupervisor(ctx, a.s.id)
		cancel()
		a.registered = false
	}
	if a.lock != nil {
		// Remove before unlocking: a checker that opens the path after
		// this sees no file, one that opened it before sees the lock
		// free once we close; both mean "ended". Only our own file:
		// after the runtime directory was wiped, the path may name a
		// lock of another supervisor's.
		protocol.RemoveLockFile(a.lockPath, a.lock)
		a.lock.Close()
		a.lock = nil
	}
	return err
}

// isRegistered reports whether the supervisors row was recorded.
func (a *addresses) isRegistered() bool { return a.registered }

// listeners returns the sockets to serve: the own one, and default.sock
// when this is the default supervisor.
func (a *addresses) listeners() []*protocol.Listener {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ls []*protocol.Listener
	for _, l := range []*protocol.Listener{a.listener, a.defaultListener} {
		if l != nil {
			ls = append(ls, l)
		}
	}
	return ls
}

// shut closes both sockets and gives up default.lock: the supervisor
// answers no new connection (the server's acceptors end).
func (a *addresses) shut() {
	a.mu.Lock()
	own, retired := a.listener, a.retired
	a.mu.Unlock()
	for _, l := range []*protocol.Listener{own, retired} {
		if l != nil {
			l.Close()
		}
	}
	a.dropDefault(0)
}

// retireGrace is how long a retiring supervisor still accepts the
// connections made to default.sock before it was removed (see
// protocol.Listener.Retire): the kernel has queued them already, so a
// moment suffices, but a loaded machine may not run the acceptor at once.
const retireGrace = 5 * time.Second

// dropDefault stops being the default supervisor: default.sock goes,
// then default.lock is freed, so that the next client starts a new one.
// The listener first, then the lock: once the lock is free a new
// supervisor may create default.sock (closing ours leaves another's socket
// alone, but there is no need to race it). With a grace (a supervisor
// retiring for good), the socket's path is removed but the clients that
// connected before are still answered for that long, rather than left
// with a closed connection; shut closes it at the latest.
func (a *addresses) dropDefault(grace time.Duration) {
	a.mu.Lock()
	def, defLock := a.defaultListener, a.defaultLock
	a.defaultListener, a.defaultLock = nil, nil
	if grace > 0 {
		a.retired = def
	}
	a.mu.Unlock()
	switch {
	case def == nil:
	case grace > 0:
		def.Retire(grace)
	default:
		def.Close()
	}
	if defLock != nil {
		defLock.Close()
	}
}

// keep puts back what was removed from the runtime directory under the
// live supervisor (a cleaner that wiped $XDG_RUNTIME_DIR/jobs, a user's
// rm), as tmux recreates its socket: the directory, its own lock (whose
// absence would read as its death to every other process) and its own
// socket, and, while it is still the default supervisor, default.lock and
// default.sock. When another supervisor took default.lock meanwhile, this
// one stops being the default and leaves that one's socket alone. The
// file watch runs it each second (Config.FileCheckInterval); nothing it finds in
// place costs more than a few lstat(2) calls.
func (a *addresses) keep() {
	s := a.s
	a.mu.Lock()
	own, def, defLock := a.listener, a.defaultListener, a.defaultLock
	a.mu.Unlock()
	defLockPath := filepath.Join(a.runtimeDir, "default.lock")
	lockGone := a.lock != nil && !protocol.Holds(a.lockPath, a.lock)
	ownGone := own != nil && own.Gone()
	defLockGone := defLock != nil && !protocol.Holds(defLockPath, defLock)
	defGone := def != nil && def.Gone()
	if !s.stayed() || !(lockGone || ownGone || defLockGone || defGone) {
		return
	}
	if err := protocol.PrepareRuntimeDir(a.runtimeDir); err != nil {
		s.logf("runtime directory removed; cannot make it again: %v", err)
		return
	}
	if lockGone {
		if f, err := protocol.LockFile(a.lockPath); err != nil {
			s.logf("lock file %s removed; cannot take it again: %v", a.lockPath, err)
		} else {
			old := a.lock
			a.lock = f
			old.Close()
		}
	}
	if ownGone {
		a.relisten(a.sockPath, func() **protocol.Listener { return &a.listener })
	}
	if defLockGone {
		f, err := protocol.LockFile(defLockPath)
		switch {
		case errors.Is(err, protocol.ErrLocked):
			// Another default supervisor started meanwhile: it serves
			// default.sock now, and this one only its own socket (the
			// socket at the path is the other's: left alone).
			a.dropDefault(0)
			s.logf("runtime directory was removed and another supervisor took default.lock: no longer the default supervisor")
			return
		case err != nil:
			s.logf("default.lock removed; cannot take it again: %v", err)
			return
		}
		a.mu.Lock()
		old := a.defaultLock
		if old == nil || !s.stayed() {
			a.mu.Unlock()
			f.Close()
			return
		}
		a.defaultLock = f
		a.mu.Unlock()
		old.Close()
	}
	a.mu.Lock()
	def = a.defaultListener
	a.mu.Unlock()
	if def != nil && def.Gone() {
		// We hold default.lock, so a socket left at default.sock is a
		// dead supervisor's.
		if err := protocol.RemoveStaleSocket(a.defaultSock); err != nil {
			s.logf("default.sock: %v", err)
			return
		}
		a.relisten(a.defaultSock, func() **protocol.Listener { return &a.defaultListener })
	}
}

// relisten listens at path again and has the server serve the new
// listener in place of the one field points to (which keeps the mutex's
// guard), closing the old one, whose path no longer names its socket.
func (a *addresses) relisten(path string, field func() **protocol.Listener) {
	s := a.s
	l, err := protocol.Listen(path)
	if err != nil {
		s.logf("socket %s removed; cannot listen again: %v", path, err)
		return
	}
	a.mu.Lock()
	p := field()
	old := *p
	if old == nil || !s.stayed() || !s.server.serve(l) {
		a.mu.Unlock()
		l.Close()
		return
	}
	*p = l
	a.mu.Unlock()
	old.Close()
	s.logf("socket %s was removed: listening there again", path)
}
