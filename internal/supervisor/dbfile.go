package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/vocab"
)

// fileCheckInterval is how often a supervisor checks that its database
// file is still the one at its path, by default (Config.FileCheckInterval).
// A check is one stat(2).
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
	running, _ := s.runners.idle()
	s.mu.Unlock()

	s.db.KeepConnections()
	s.db.LetGoOfSideFiles()
	s.logf("database %s was removed or replaced: refusing new jobs; %d running jobs finish into the file that was open, then the supervisor exits", s.db.Path, running)
	s.addr.dropDefault(retireGrace)
	s.poke()
}

// fileWatch is the service that checks, every Config.FileCheckInterval, that the
// database file is still the one at its path (checkFile, which retires
// the supervisor when it is not), and keeps the supervisor's addresses in
// the runtime directory (addresses.keep).
type fileWatch struct {
	startstop.Base
	s *Supervisor
}

// Start starts the checks.
func (w *fileWatch) Start(ctx context.Context) error {
	w.Init(ctx)
	w.Go(w.loop)
	return nil
}

// Stop ends the checks.
func (w *fileWatch) Stop() error {
	w.Halt()
	return nil
}

// loop checks the database file every Config.FileCheckInterval until Stop or
// the supervisor retires, and the runtime directory's lock and sockets.
func (w *fileWatch) loop(ctx context.Context) {
	t := time.NewTicker(w.s.cfg.FileCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.s.checkFile() != nil {
			return
		}
		w.s.addr.keep()
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
