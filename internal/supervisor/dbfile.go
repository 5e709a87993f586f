package supervisor

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// fileCheckInterval is how often a supervisor checks that its database
// file is still the one at its path. A check is one stat(2).
const fileCheckInterval = time.Second

// reservedConns is how many database connections a supervisor keeps open
// besides the output appender's own: after its database file is replaced
// it opens no other (see retire), and its runners, janitor and socket
// handlers share these to record the end of its running jobs.
const reservedConns = 4

// checkFile returns the *vocab.ReplacedError once the database file was
// removed or replaced, retiring the supervisor the first time (see retire).
func (s *Supervisor) checkFile() error {
	s.mu.Lock()
	err := s.replaced
	s.mu.Unlock()
	if err != nil {
		return err
	}
	err = s.db.CheckFile()
	if !errors.Is(err, vocab.ErrReplaced) {
		// Another error of stat(2) proves nothing about the file; the
		// next check looks again.
		return nil
	}
	s.retire(err)
	return err
}

// retire handles a database file that was removed or replaced while the
// supervisor ran. What it writes from then on reaches only the file it has
// open (unlinked, or moved elsewhere), so it takes no new job: Start fails
// with the ReplacedError. It gives up the default socket and lock at once,
// so that the next client starts a supervisor on the file now at the
// path. Its running jobs are not killed: they run to their end and their
// output and status land in the file that was open (which a moved database
// keeps), and they can still be killed through the supervisor's own
// socket. A detached supervisor then exits.
func (s *Supervisor) retire(err error) {
	s.mu.Lock()
	if s.replaced != nil {
		s.mu.Unlock()
		return
	}
	s.replaced = err
	running := len(s.children)
	def, defLock := s.defaultListener, s.defaultLock
	s.defaultListener, s.defaultLock = nil, nil
	s.mu.Unlock()

	s.db.KeepConnections()
	s.db.LetGoOfSideFiles()
	s.logf("database %s was removed or replaced: refusing new jobs; %d running jobs finish into the file that was open, then the supervisor exits", s.db.Path, running)
	// The listener first, then the lock: once the lock is free a new
	// supervisor may create default.sock (closing ours leaves another's
	// socket alone, but there is no need to race it).
	if def != nil {
		def.Close()
	}
	if defLock != nil {
		defLock.Close()
	}
	s.poke()
}

// watchFile checks the database file every fileCheckInterval until Close,
// and the runtime directory's lock and sockets (keepAddresses).
func (s *Supervisor) watchFile() {
	defer s.wg.Done()
	t := time.NewTicker(fileCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if s.checkFile() != nil {
			return
		}
		s.keepAddresses()
	}
}

// openCheck wraps a db.CheckForWriter failure for Open; a CorruptError stays whole,
// so that it reads "database corrupt: PATH: cause" wherever it ends up.
func openCheck(err error) error {
	var ce *vocab.CorruptError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("open supervisor: %w", err)
}
