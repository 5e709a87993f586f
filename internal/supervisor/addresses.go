package supervisor

import (
	"errors"
	"path/filepath"

	"github.com/agentjobs/jobs/internal/protocol"
)

// keepAddresses puts back what was removed from the runtime directory
// under the live supervisor (a cleaner that wiped $XDG_RUNTIME_DIR/jobs, a
// user's rm), as tmux recreates its socket: the directory, its own lock
// (whose absence would read as its death to every other process) and its
// own socket, and, while it is still the default supervisor,
// default.lock and default.sock. When another supervisor took
// default.lock meanwhile, this one stops being the default and leaves
// that one's socket alone. It runs on each file check (fileCheckInterval);
// nothing it finds in place costs more than a few lstat(2) calls.
func (s *Supervisor) keepAddresses() {
	s.mu.Lock()
	own, def, defLock := s.listener, s.defaultListener, s.defaultLock
	stop := s.closing || s.replaced != nil
	s.mu.Unlock()
	defLockPath := filepath.Join(s.runtimeDir, "default.lock")
	lockGone := s.lock != nil && !protocol.Holds(s.lockPath, s.lock)
	ownGone := own != nil && own.Gone()
	defLockGone := defLock != nil && !protocol.Holds(defLockPath, defLock)
	defGone := def != nil && def.Gone()
	if stop || !(lockGone || ownGone || defLockGone || defGone) {
		return
	}
	if err := protocol.PrepareRuntimeDir(s.runtimeDir); err != nil {
		s.logf("runtime directory removed; cannot make it again: %v", err)
		return
	}
	if lockGone {
		if f, err := protocol.LockFile(s.lockPath); err != nil {
			s.logf("lock file %s removed; cannot take it again: %v", s.lockPath, err)
		} else {
			old := s.lock
			s.lock = f
			old.Close()
		}
	}
	if ownGone {
		s.relisten(s.sockPath, func() **protocol.Listener { return &s.listener })
	}
	if defLockGone {
		f, err := protocol.LockFile(defLockPath)
		switch {
		case errors.Is(err, protocol.ErrLocked):
			// Another default supervisor started meanwhile: it serves
			// default.sock now, and this one only its own socket.
			s.mu.Lock()
			def, defLock = s.defaultListener, s.defaultLock
			s.defaultListener, s.defaultLock = nil, nil
			s.mu.Unlock()
			if def != nil {
				def.Close() // the socket at the path is the other's: left alone
			}
			if defLock != nil {
				defLock.Close()
			}
			s.logf("runtime directory was removed and another supervisor took default.lock: no longer the default supervisor")
			return
		case err != nil:
			s.logf("default.lock removed; cannot take it again: %v", err)
			return
		}
		s.mu.Lock()
		old := s.defaultLock
		if old == nil || s.closing || s.replaced != nil {
			s.mu.Unlock()
			f.Close()
			return
		}
		s.defaultLock = f
		s.mu.Unlock()
		old.Close()
	}
	s.mu.Lock()
	def = s.defaultListener
	s.mu.Unlock()
	if def != nil && def.Gone() {
		// We hold default.lock, so a socket left at default.sock is a
		// dead supervisor's.
		if err := protocol.RemoveStaleSocket(s.defaultSock); err != nil {
			s.logf("default.sock: %v", err)
			return
		}
		s.relisten(s.defaultSock, func() **protocol.Listener { return &s.defaultListener })
	}
}

// relisten listens at path again and serves the new listener in place of
// the one field points to (which keeps the mutex's guard), closing the old
// one, whose path no longer names its socket.
func (s *Supervisor) relisten(path string, field func() **protocol.Listener) {
	l, err := protocol.Listen(path)
	if err != nil {
		s.logf("socket %s removed; cannot listen again: %v", path, err)
		return
	}
	s.mu.Lock()
	p := field()
	old := *p
	if old == nil || s.closing || s.replaced != nil {
		s.mu.Unlock()
		l.Close()
		return
	}
	*p = l
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serve(l)
	old.Close()
	s.logf("socket %s was removed: listening there again", path)
}
