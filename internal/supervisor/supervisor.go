package supervisor

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentjobs/jobs/internal/hook"
	"github.com/agentjobs/jobs/internal/sweep"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
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

// Supervisor owns live children: one runner goroutine per job, a janitor,
// and the socket servers. Create it with New, start it with Open, end it
// with Close. Its methods are safe for concurrent use.
type Supervisor struct {
	cfg Config
	db  *db.DB
	id  string

	runtimeDir  string
	lockPath    string
	sockPath    string
	defaultSock string

	endMu sync.Mutex // one job's end at a time on a tight disk (reserveForEnd)

	// noCgroup is set once the system turned out to offer no cgroup for
	// jobs (see jobCgroup).
	noCgroup atomic.Bool

	// ctx is cancelled by Close; it scopes the janitor, the socket
	// handlers and the idle watcher. Runners do not stop on it: their
	// children are ended explicitly, and their final writes use
	// context.WithoutCancel.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine the supervisor owns except the idle
	// watcher (which may itself run Close): janitor, acceptors,
	// connection handlers, runners and their helpers.
	wg sync.WaitGroup

	lock        *os.File // replaced only by keepAddresses, which Close waits for
	defaultLock *os.File // guarded by mu once opened: retire gives it up
	registered  bool
	// listener serves the supervisor's own socket; guarded by mu once
	// opened (keepAddresses replaces it).
	listener *protocol.Listener
	app      *logs.Appender
	trickle  trickler // reads the pipes of trickling jobs
	reaper   *proc.Reaper

	mu        sync.Mutex
	opened    bool
	closing   bool
	children  map[string]*child
	conns     map[net.Conn]struct{}
	idleSince time.Time
	dropped   map[string]*dropNote
	activity  chan struct{} // poked when children come and go
	// queueKick asks the dispatcher for a look at the queue (queue.go);
	// dispatchMu makes the looks one at a time; queuedCount is how many
	// queued jobs the supervisor owns, as of its last look (it keeps the
	// supervisor from its idle exit).
	queueKick   chan struct{}
	dispatchMu  sync.Mutex
	queuedCount atomic.Int64
	// queuedEnv holds, in memory only, the environment (the caller's and
	// the --env values) of each job this supervisor queued: values are
	// never stored. Guarded by mu.
	queuedEnv map[string]queuedEnv
	// replaced is set once the database file was removed or replaced
	// (see retire); the supervisor then takes no new job.
	replaced error
	// defaultListener serves default.sock (Default); retire closes it
	// before Close does, keepAddresses may replace it.
	defaultListener *protocol.Listener

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	idleDone  chan struct{}
}

// dropNote accumulates output the database could not take, until the
// job's runner records it as an output_dropped event.
type dropNote struct {
	bytes int64
	err   string
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
	id := db.NewID()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:         cfg,
		db:          cfg.DB,
		id:          id,
		runtimeDir:  cfg.RuntimeDir,
		lockPath:    filepath.Join(cfg.RuntimeDir, id+".lock"),
		sockPath:    filepath.Join(cfg.RuntimeDir, id+".sock"),
		defaultSock: filepath.Join(cfg.RuntimeDir, "default.sock"),
		ctx:         ctx,
		cancel:      cancel,
		children:    map[string]*child{},
		conns:       map[net.Conn]struct{}{},
		dropped:     map[string]*dropNote{},
		activity:    make(chan struct{}, 1),
		queueKick:   make(chan struct{}, 1),
		done:        make(chan struct{}),
		idleDone:    make(chan struct{}),
	}
	return s, nil
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
func (s *Supervisor) SocketPath() string { return s.sockPath }

// RuntimeDir returns the directory holding the supervisor's lock and
// sockets.
func (s *Supervisor) RuntimeDir() string { return s.runtimeDir }

// Done is closed once the supervisor has shut down, after an idle exit or
// Close.
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Open registers the supervisor and starts it: it prepares the runtime
// directory, takes the default lock (Default only; vocab.ErrDefaultRunning when
// taken) and its own lock, records its supervisors row, listens on its
// sockets, marks lost the jobs of dead supervisors, and starts the
// appender, the janitor, the socket servers and the idle watcher. After a
// failed Open the supervisor is closed.
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
	if err := protocol.PrepareRuntimeDir(s.runtimeDir); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	if s.cfg.Default {
		f, err := protocol.LockFile(filepath.Join(s.runtimeDir, "default.lock"))
		if errors.Is(err, protocol.ErrLocked) {
			return fmt.Errorf("open supervisor: %w", vocab.ErrDefaultRunning)
		}
		if err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
		s.defaultLock = f
	}
	// The lock comes before the row: a row whose lock is free reads as a
	// dead supervisor to every other process.
	if s.lock, err = protocol.LockFile(s.lockPath); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	host, _ := os.Hostname()
	if err := s.db.CreateSupervisor(ctx, db.Supervisor{
		ID:         s.id,
		PID:        os.Getpid(),
		Host:       host,
		Kind:       s.cfg.Kind,
		LockPath:   s.lockPath,
		SocketPath: s.sockPath,
		Version:    s.cfg.Version,
	}); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	s.registered = true

	if s.listener, err = protocol.Listen(s.sockPath); err != nil {
		return fmt.Errorf("open supervisor: %w", err)
	}
	if s.cfg.Default {
		// We hold default.lock, so a socket of ours left at default.sock
		// belongs to a supervisor that died.
		if err := protocol.RemoveStaleSocket(s.defaultSock); err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
		if s.defaultListener, err = protocol.Listen(s.defaultSock); err != nil {
			return fmt.Errorf("open supervisor: %w", err)
		}
	}

	s.reaper = acquireReaper(s.cfg.Logf)
	ao := logs.ProcessOptions(s.noteDropped)
	ao.FlushInterval = s.cfg.FlushInterval
	s.app = logs.NewAppender(s.db, ao)
	s.trickle = trickler{s: s, pipes: map[*tricklePipe]struct{}{}, now: make(chan struct{}, 1)}
	s.app.Open()

	dead := s.deadSupervisors(ctx)
	if n, err := s.sweep(ctx); err != nil {
		s.cfg.Logf("sweep lost jobs: %v", err)
	} else if n > 0 {
		s.cfg.Logf("marked %d jobs of dead supervisors lost", n)
	}

	// Queued jobs of supervisors that are gone (crashed, or closed while
	// jobs waited) are this one's now: they start in their order.
	s.adoptQueued(ctx)
	if n, err := s.db.CountQueued(ctx, s.id); err == nil {
		s.queuedCount.Store(int64(n))
	}
	s.mu.Lock()
	s.idleSince = time.Now()
	s.mu.Unlock()
	for _, l := range []*protocol.Listener{s.listener, s.defaultListener} {
		if l != nil {
			s.wg.Add(1)
			go s.serve(l)
		}
	}
	s.wg.Add(4)
	go s.dispatcher()
	s.kickQueue()
	go s.janitor()
	go s.watchFile()
	go s.idleWatch()
	// The hooks left due while no supervisor ran (see runDueHooks), looked
	// for in the background: a long history must not hold up serving.
	go func() {
		defer s.wg.Done()
		s.runDueHooks(s.ctx, dead)
	}()
	return nil
}

// Close shuts the supervisor down: it stops taking requests, kills its
// running jobs (status killed, reason "supervisor closed"), waits for every
// goroutine it owns, flushes the output, records its end and releases its
// locks. It is idempotent and returns the first Close's error.
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

// shutdown runs once, from Close or from the idle watcher.
func (s *Supervisor) shutdown() {
	s.mu.Lock()
	s.closing = true
	kids := make([]*child, 0, len(s.children))
	for _, c := range s.children {
		kids = append(kids, c)
	}
	s.mu.Unlock()

	// Stop answering first, and give up default.lock, so that a client
	// that comes now starts a new default supervisor instead of talking
	// to one that is going away.
	var errs []error
	s.mu.Lock()
	own, def, defLock := s.listener, s.defaultListener, s.defaultLock
	s.defaultListener, s.defaultLock = nil, nil
	s.mu.Unlock()
	for _, l := range []*protocol.Listener{own, def} {
		if l != nil {
			l.Close()
		}
	}
	if defLock != nil {
		defLock.Close()
	}

	// A database locked by another process must not keep the jobs' ends
	// waiting for their spooled output now.
	if s.app != nil {
		s.app.StopWaiting()
	}
	var kills sync.WaitGroup
	for _, c := range kids {
		kills.Add(1)
		go func() {
			defer kills.Done()
			if _, err := s.endChild(context.Background(), c, vocab.StatusKilled, "supervisor closed", s.cfg.Grace); err != nil {
				s.cfg.Logf("kill job %s: %v", c.id, err)
			}
		}()
	}
	kills.Wait()
	if s.cfg.Kind == "embedded" && s.registered {
		// An embedded supervisor's jobs end with its program, the queued
		// ones too: no other supervisor is to start them later. A
		// detached one leaves them queued for the next (queue.go).
		s.dispatchMu.Lock() // no look at the queue is under way
		s.endQueued(context.Background(), "supervisor closed")
		s.dispatchMu.Unlock()
	}

	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()

	if s.app != nil {
		if err := s.app.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.reaper != nil {
		releaseReaper()
	}
	if s.registered {
		ctx, cancel := context.WithTimeout(context.Background(), db.FinalWriteTimeout)
		if err := s.db.EndSupervisor(ctx, s.id); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if s.lock != nil {
		// Remove before unlocking: a checker that opens the path after
		// this sees no file, one that opened it before sees the lock
		// free once we close; both mean "ended". Only our own file:
		// after the runtime directory was wiped, the path may name a
		// lock of another supervisor's.
		protocol.RemoveLockFile(s.lockPath, s.lock)
		s.lock.Close()
	}
	if err := errors.Join(errs...); err != nil {
		s.closeErr = fmt.Errorf("close supervisor: %w", err)
	}
	close(s.done)
}

// Flush returns once every output byte read so far is in the database.
func (s *Supervisor) Flush(ctx context.Context) error {
	if s.app == nil {
		return nil
	}
	return s.app.Flush(ctx)
}

// Sync returns once every byte job jobID has written to its pipes so far
// is in the database: what its pipes hold is read at once (in order with
// its pumps, under the pair's lock) and the appender is flushed. A job
// blocked on its stdin writes nothing more, so after Sync a reader sees
// the prompt it wrote before blocking, however far the pumps' paced
// reads and the flushes lag on a loaded machine. An unknown or finished
// job has nothing left in its pipes: only the flush is done.
func (s *Supervisor) Sync(ctx context.Context, jobID string) error {
	if c := s.child(jobID); c != nil {
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
// is not counted in wg because it may run shutdown itself, which waits for
// wg; Close waits for it through idleDone instead.
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
		busy := len(s.children) > 0 || s.queuedCount.Load() > 0
		left := period - time.Since(s.idleSince)
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
			<-s.ctx.Done()
			return
		}
		if busy {
			left = period
		}
		timer.Reset(left)
		select {
		case <-s.ctx.Done():
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

// noteDropped is the appender's OnDropped callback. It only counts: the
// database just failed, so the event is written later by the job's runner.
func (s *Supervisor) noteDropped(jobID string, n int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dropped[jobID]
	if d == nil {
		d = &dropNote{}
		s.dropped[jobID] = d
	}
	d.bytes += n
	if err != nil {
		d.err = err.Error()
	}
}

// takeDropped returns and forgets what was dropped of jobID.
func (s *Supervisor) takeDropped(jobID string) *dropNote {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dropped[jobID]
	delete(s.dropped, jobID)
	return d
}

func (s *Supervisor) logf(format string, args ...any) { s.cfg.Logf(format, args...) }
