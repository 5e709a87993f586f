package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/hook"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Defaults for Config's zero fields.
const (
	DefaultIdleExit        = 60 * time.Second
	DefaultGrace           = control.DefaultGrace
	DefaultJanitorInterval = 30 * time.Second
	DefaultEventRetention  = sweep.DefaultEventRetention
	DefaultPerScope        = 50
	DefaultTotal           = 200
	// DefaultDrainTimeout is how long the pipes of a job whose main
	// process has exited may stay open (held by a grandchild) before the
	// job is finished anyway; the same idea as exec.Cmd.WaitDelay.
	DefaultDrainTimeout = 2 * time.Second
	// DefaultHookTimeout bounds an on-exit hook; it is killed after it.
	DefaultHookTimeout = hook.DefaultTimeout
)

// Config configures a Supervisor. Zero fields take the defaults above.
type Config struct {
	// DB is the database the supervisor records into. Required.
	DB *db.DB
	// RuntimeDir holds the lock files and sockets; "" means
	// DefaultRuntimeDir(DB.Path).
	RuntimeDir string
	// Kind is "detached" (a `jobs supervise` process) or "embedded" (the
	// default).
	Kind string
	// Default makes the supervisor also hold <runtime>/default.lock and
	// serve <runtime>/default.sock. Open fails with vocab.ErrDefaultRunning when
	// another process holds the lock.
	Default bool
	// IdleExit closes the supervisor after this long with no running job
	// of its own; 0 means never. RunDetached uses DefaultIdleExit.
	IdleExit time.Duration
	// Limits caps running jobs; zero fields mean 50 per scope and 200 in
	// all, negative ones mean unlimited.
	Limits db.Limits
	// Grace is the default time between SIGTERM and SIGKILL (2 s).
	Grace time.Duration
	// JanitorInterval is how often the janitor runs (30 s).
	JanitorInterval time.Duration
	// FileCheckInterval is how often the file watch checks that the
	// database file is still the one at its path (1 s); a start checks
	// it too, whatever this is.
	FileCheckInterval time.Duration
	// EventRetention is how long events are kept (30 days).
	EventRetention time.Duration
	// Monotonic reads a clock that only moves forward, at the pace of
	// real time, whatever is done to the wall clock; nil means Go's
	// monotonic clock. The janitor compares it with DB.Now (see
	// clockWatch); tests replace both.
	Monotonic func() time.Duration
	// FlushInterval is the spacing of the flushes that store a trickle of
	// output (logs.DefaultFlushInterval when 0): output shows within
	// about this long.
	FlushInterval time.Duration
	// DrainTimeout bounds the pipe drain after a job's main process exits
	// (2 s).
	DrainTimeout time.Duration
	// HookTimeout bounds an on-exit hook (60 s).
	HookTimeout time.Duration
	// OnExit is called once for each job of this supervisor that reaches a
	// terminal status, after the status is stored, from the job's runner
	// goroutine.
	OnExit func(db.Job)
	// Executable is the jobs binary, for helpers; "" means os.Executable().
	Executable string
	// Version is recorded in the supervisors row.
	Version string
	// Logf receives diagnostics that have no caller to return to; nil
	// discards them.
	Logf func(format string, args ...any)
}

// Supervisor owns live children. It is composed of services (package
// startstop), each owning its fields and goroutines, which Open starts in
// order and Close stops in reverse:
//
//   - addresses: the runtime directory, the locks, the supervisors row
//     and the sockets (addresses.go);
//   - hooks: the on_exit hooks of jobs it did not see end (hook.go);
//   - runners: the children, one runner goroutine each, their pipes and
//     the output appender (runners.go);
//   - janitor: lost jobs, expiry, cgroups, every JanitorInterval
//     (janitor.go);
//   - queue: the queued jobs it owns and their dispatcher (queue.go);
//   - server: the connections to its sockets (server.go);
//   - fileWatch: its database file and addresses, each second (dbfile.go).
//
// The Supervisor itself decides its life: it refuses new work once closing
// or retired, and its idle watcher closes it. Create it with New, start it
// with Open, end it with Close. Its methods are safe for concurrent use.
type Supervisor struct {
	cfg Config
	db  *db.DB
	id  string

	addr    *addresses
	hooks   *hooks
	runners *runners
	janitor *janitor
	queue   *queue
	server  *server
	watch   *fileWatch
	tmux    *tmuxStarter // no service: see tmuxStarter

	// mu guards the supervisor's life: whether it is open, closing, or
	// retired (replaced). A service counts new work only under it while
	// the supervisor takes work (see admit), so that nothing is counted
	// once shutdown began.
	mu      sync.Mutex
	opened  bool
	closing bool
	// replaced is set once the database file was removed or replaced
	// (see retire); the supervisor then takes no new job.
	replaced error
	activity chan struct{} // poked when children come and go

	// idleCtx is cancelled by shutdown; it ends the idle watcher, which
	// is not a service: it may run shutdown itself, so Close waits for it
	// through idleDone.
	idleCtx    context.Context
	idleCancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	idleDone  chan struct{}
}

// New checks cfg and returns a Supervisor that is not yet open.
func New(cfg Config) (*Supervisor, error) {
	if cfg.DB == nil {
		return nil, errors.New("new supervisor: no database")
	}
	switch cfg.Kind {
	case "":
		cfg.Kind = "embedded"
	case "embedded", "detached":
	default:
		return nil, fmt.Errorf("new supervisor: kind %q is not detached or embedded", cfg.Kind)
	}
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = protocol.DefaultRuntimeDir(cfg.DB.Path)
	}
	cfg.Limits.PerScope = limitOrDefault(cfg.Limits.PerScope, DefaultPerScope)
	cfg.Limits.Total = limitOrDefault(cfg.Limits.Total, DefaultTotal)
	setDefault(&cfg.Grace, DefaultGrace)
	setDefault(&cfg.JanitorInterval, DefaultJanitorInterval)
	setDefault(&cfg.FileCheckInterval, fileCheckInterval)
	setDefault(&cfg.EventRetention, DefaultEventRetention)
	setDefault(&cfg.DrainTimeout, DefaultDrainTimeout)
	setDefault(&cfg.HookTimeout, DefaultHookTimeout)
	if cfg.Monotonic == nil {
		cfg.Monotonic = monotonic
	}
	if cfg.IdleExit < 0 {
		cfg.IdleExit = 0
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	idleCtx, idleCancel := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:        cfg,
		db:         cfg.DB,
		id:         db.NewID(),
		activity:   make(chan struct{}, 1),
		idleCtx:    idleCtx,
		idleCancel: idleCancel,
		done:       make(chan struct{}),
		idleDone:   make(chan struct{}),
	}
	s.addr = newAddresses(s)
	s.hooks = &hooks{s: s}
	s.runners = newRunners(s)
	s.janitor = &janitor{s: s}
	s.queue = newQueue(s)
	s.server = newServer(s)
	s.watch = &fileWatch{s: s}
	s.tmux = &tmuxStarter{s: s}
	return s, nil
}

// services are the supervisor's services in the order Open starts them:
// each uses only those before it, and Close stops them in reverse.
func (s *Supervisor) services() []startstop.Service {
	return []startstop.Service{s.addr, s.hooks, s.runners, s.janitor, s.queue, s.server, s.watch}
}

func limitOrDefault(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0 // db.Limits: 0 means unlimited
	}
	return n
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// ID returns the supervisor's id, as recorded in the supervisors table and
// in each of its jobs.
func (s *Supervisor) ID() string { return s.id }

// SocketPath returns the supervisor's own socket, <runtime>/<id>.sock.
func (s *Supervisor) SocketPath() string { return s.addr.sockPath }

// RuntimeDir returns the directory holding the supervisor's lock and
// sockets.
func (s *Supervisor) RuntimeDir() string { return s.addr.runtimeDir }

// Done is closed once the supervisor has shut down, after an idle exit or
// Close.
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Open registers the supervisor and starts it: after checking its
// database it starts its services in order (see Supervisor): the runtime
// directory, the default lock (Default only; vocab.ErrDefaultRunning when
// taken), its own lock, its supervisors row and its sockets; the hooks;
// the appender; the janitor, which first marks lost the jobs of dead
// supervisors; the queue, which first takes over the queued jobs of
// supervisors that are gone; the socket servers; the file watch; and
// then the idle watcher. After a failed Open the supervisor is closed.
func (s *Supervisor) Open(ctx context.Context) (err error) {
	s.mu.Lock()
	if s.opened {
		s.mu.Unlock()
		return errors.New("open supervisor: already opened")
	}
	s.opened = true
	s.mu.Unlock()
	defer func() {
		if err != nil {
			// No idle watcher was started; Close must not wait for one.
			close(s.idleDone)
			s.closeOnce.Do(s.shutdown)
		}
	}()

	if err := s.db.CheckForWriter(ctx); err != nil {
		return openCheck(err)
	}
	if err := s.db.ReserveConnections(ctx, reservedConns); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	if err := startstop.StartAll(ctx, s.services()...); err != nil {
		return err
	}
	go s.idleWatch()
	return nil
}

// Close shuts the supervisor down: it stops taking requests, kills its
// running jobs (status killed, reason "supervisor closed"), stops its
// services in reverse order, each waiting for the goroutines it owns
// (the appender flushes the output, the addresses record the
// supervisor's end and release its locks). It is idempotent and returns
// the first Close's error.
func (s *Supervisor) Close() error {
	s.closeOnce.Do(s.shutdown)
	s.mu.Lock()
	opened := s.opened
	s.mu.Unlock()
	if opened {
		<-s.idleDone
	}
	return s.closeErr
}

// shutdown runs once, from Close, from the idle watcher or after a failed
// Open. Before the services stop, the supervisor refuses new work and
// ends its jobs, while its connections still answer what is asked of
// jobs that are ending.
func (s *Supervisor) shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()

	// Stop answering first, and give up default.lock, so that a client
	// that comes now starts a new default supervisor instead of talking
	// to one that is going away.
	s.addr.shut()
	s.runners.endAll("supervisor closed")
	if s.cfg.Kind == "embedded" && s.addr.isRegistered() {
		// An embedded supervisor's jobs end with its program, the queued
		// ones too: no other supervisor is to start them later. A
		// detached one leaves them queued for the next (queue.go).
		s.queue.endAll(context.Background(), "supervisor closed")
	}
	s.idleCancel()
	if err := startstop.StopAll(s.services()...); err != nil {
		s.closeErr = fmt.Errorf("close supervisor: %w", err)
	}
	close(s.done)
}

// admit runs count, which counts new work in a service (a child, a
// connection, a hook), unless the supervisor is closing or not open, and
// reports whether it ran it. Under mu, where shutdown sets closing, so
// that no work is counted once shutdown began.
func (s *Supervisor) admit(count func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takingLocked(); err != nil {
		return err
	}
	count()
	return nil
}

// takingJobs is nil unless the supervisor is closing or not open.
func (s *Supervisor) takingJobs() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takingLocked()
}

func (s *Supervisor) takingLocked() error {
	if !s.opened {
		return errors.New("supervisor is not open")
	}
	if s.closing {
		return vocab.ErrSupervisorClosed
	}
	return nil
}

// stayed reports whether the supervisor is neither closing nor retired:
// what it lost of its addresses is made again only then.
func (s *Supervisor) stayed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closing && s.replaced == nil
}

// Flush returns once every output byte read so far is in the database.
func (s *Supervisor) Flush(ctx context.Context) error {
	return s.runners.flush(ctx)
}

// Sync returns once every byte job jobID has written to its pipes so far
// is in the database: what its pipes hold is read at once (in order with
// its pumps, under the pair's lock) and the appender is flushed. A job
// blocked on its stdin writes nothing more, so after Sync a reader sees
// the prompt it wrote before blocking, however far the pumps' paced
// reads and the flushes lag on a loaded machine. An unknown or finished
// job has nothing left in its pipes: only the flush is done.
func (s *Supervisor) Sync(ctx context.Context, jobID string) error {
	if c := s.runners.child(jobID); c != nil {
		c.mu.Lock()
		pair := c.pair
		c.mu.Unlock()
		if pair != nil {
			pair.readAll()
		}
	}
	return s.Flush(ctx)
}

// idleWatch closes the supervisor after IdleExit with no running job. It
// is no service's because it may run shutdown itself, which stops them
// all; Close waits for it through idleDone instead.
func (s *Supervisor) idleWatch() {
	defer close(s.idleDone)
	// Without an idle exit (IdleExit 0) the watch still ends a retired
	// supervisor once its jobs have ended: its database is gone, and
	// nothing can reach it any more. It then looks when woken (poke, on
	// every change of children and on retirement), and once an hour.
	period, never := s.cfg.IdleExit, s.cfg.IdleExit <= 0
	if never {
		period = time.Hour
	}
	timer := time.NewTimer(period)
	defer timer.Stop()
	for {
		s.mu.Lock()
		running, idleSince := s.runners.idle()
		busy := running > 0 || s.queue.count() > 0
		left := period - time.Since(idleSince)
		switch {
		case s.replaced != nil:
			left = 0 // retired: nothing more to wait for once idle
		case never:
			left = period
		}
		if !busy && left <= 0 {
			// Decide under the lock, so that no Start slips in between
			// the check and the refusal of new jobs.
			s.closing = true
		}
		closing := s.closing
		s.mu.Unlock()
		if !busy && left <= 0 {
			if s.replaced != nil {
				s.cfg.Logf("the jobs of the replaced database have ended, exiting")
			} else {
				s.cfg.Logf("idle for %s, exiting", s.cfg.IdleExit)
			}
			s.closeOnce.Do(s.shutdown)
			return
		}
		if closing {
			<-s.idleCtx.Done()
			return
		}
		if busy {
			left = period
		}
		timer.Reset(left)
		select {
		case <-s.idleCtx.Done():
			return
		case <-s.activity:
		case <-timer.C:
		}
	}
}

// poke wakes the idle watcher after the set of children changed.
func (s *Supervisor) poke() {
	select {
	case s.activity <- struct{}{}:
	default:
	}
}

func (s *Supervisor) logf(format string, args ...any) { s.cfg.Logf(format, args...) }
