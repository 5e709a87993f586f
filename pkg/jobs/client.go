package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/supervisor"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// DB is the database path; empty means DefaultDBPath().
	DB string
	// Scope is the owner of the jobs this client sees: empty means
	// $JOBS_SCOPE, else "default".
	Scope string
	// Detached hands jobs to a `jobs supervise` process so they outlive
	// this program. Otherwise the client supervises its own children and
	// Close ends them.
	Detached bool
	// Executable is the jobs binary used to start a detached supervisor
	// (and the helper of tmux jobs); empty means this program if it is
	// jobs, else $JOBS_EXECUTABLE, else "jobs" from $PATH.
	Executable string
	// MaxRunningPerScope and MaxRunning cap running jobs (defaults 50
	// and 200).
	MaxRunningPerScope int
	MaxRunning         int
	// Grace is the default time between SIGTERM and SIGKILL (2 s).
	Grace time.Duration
	// FlushInterval (in-process mode) is the spacing of the flushes that
	// store a trickle of output: output shows within about this long
	// (100 ms when 0). A program that reads rarely may raise it to write
	// less often; a Wait for input stores a job's output at once whatever
	// it is.
	FlushInterval time.Duration
	// WriteTimeout bounds Write: it gives up with ErrNotReading once the
	// job has taken none of the rest of the data for this long; 0 means
	// DefaultWriteTimeout, negative means no bound but ctx's.
	WriteTimeout time.Duration
	// OnExit is called once for each job this client supervises when it
	// reaches a terminal status (in-process mode).
	OnExit func(Job)
	// LazyOpen (detached mode) defers opening the database to the first
	// call that needs it, and Open then reports no database error: that
	// call does. A Start that a running detached supervisor answers never
	// opens it. Opening costs a connection and a read of the whole schema,
	// a large part of a warm `jobs start`.
	LazyOpen bool
	// ReadOnly opens the database read-only (SQLite's mode=ro): nothing
	// this client does can change the file. Reads then neither mark jobs
	// of dead supervisors lost nor record accesses for TTLs, and every
	// call that would write returns ErrReadOnly. The schema must be the
	// one this version writes (a read-only open migrates nothing).
	ReadOnly bool
	// OnlyReads says the caller only reads (a front end's read verb). The
	// database is then opened read-only when this process cannot write it,
	// or when every supervisor that wrote it ran on another host: a read
	// never changes another host's database, or a copy of one. Nor does
	// it migrate an older schema (ErrTooOld): a supervisor of the older
	// version may still be running on it.
	OnlyReads bool
}

// MaxScopeBytes, MaxNameBytes and MaxLabelBytes bound a scope, a job name
// and a label. These are handles and short notes, shown in every list;
// longer ones are refused (ErrInvalid), as are NUL and invalid UTF-8, which
// neither a terminal nor JSON could show exactly.
const (
	MaxScopeBytes = 256
	MaxNameBytes  = 256
	MaxLabelBytes = 4096
	// MaxTmuxPrefix bounds Spec.TmuxPrefix.
	MaxTmuxPrefix = 32
)

// validTmuxPrefix reports whether p may start a tmux session name: tmux
// takes '.' and ':' as separators in a target, so only letters, digits,
// '-' and '_'.
func validTmuxPrefix(p string) bool {
	if len(p) > MaxTmuxPrefix {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Defaults for Options.
const (
	DefaultScope              = vocab.DefaultScope
	DefaultMaxRunningPerScope = 50
	DefaultMaxRunning         = 200
	DefaultGrace              = control.DefaultGrace
	DefaultWriteTimeout       = 10 * time.Second
)

// DefaultDBPath returns $JOBS_DB, else $XDG_STATE_HOME/jobs/jobs.db, else
// ~/.local/state/jobs/jobs.db.
func DefaultDBPath() (string, error) {
	if p := os.Getenv("JOBS_DB"); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "jobs", "jobs.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("find database: no home directory; set JOBS_DB or --db")
	}
	return filepath.Join(home, ".local", "state", "jobs", "jobs.db"), nil
}

// Client is a handle on a jobs database for one scope. It is safe for
// concurrent use by many goroutines.
type Client struct {
	opts Options
	path string // absolute database path
	db   *db.DB // nil until opened (LazyOpen); set under mu
	// roWhy says why a read opened the database read-only by itself.
	roWhy string

	mu     sync.Mutex
	closed bool
	sup    *supervisor.Supervisor // in-process mode
	conn   *protocol.Conn         // detached mode: the default supervisor

	// looks counts the looks at the database of Wait, Follow and Events
	// while they wait: what tests count to see that a wait sleeps.
	looks atomic.Int64
}

// Open opens (creating and migrating when needed) the database and returns
// a client for opts.Scope. In-process mode starts the client's own
// supervisor at once; detached mode reaches for one on the first Start.
func Open(ctx context.Context, opts Options) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("open: %w: nil context", ErrInvalid)
	}
	if opts.DB == "" {
		p, err := DefaultDBPath()
		if err != nil {
			return nil, err
		}
		opts.DB = p
	}
	if opts.Scope == "" {
		opts.Scope = os.Getenv("JOBS_SCOPE")
	}
	if opts.Scope == "" {
		opts.Scope = DefaultScope
	}
	if err := checkText("scope", opts.Scope, MaxScopeBytes); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if opts.MaxRunningPerScope == 0 {
		opts.MaxRunningPerScope = DefaultMaxRunningPerScope
	}
	if opts.MaxRunning == 0 {
		opts.MaxRunning = DefaultMaxRunning
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	switch {
	case opts.WriteTimeout == 0:
		opts.WriteTimeout = DefaultWriteTimeout
	case opts.WriteTimeout < 0:
		opts.WriteTimeout = 0 // the runner: no bound
	}
	path, err := filepath.Abs(opts.DB)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	c := &Client{opts: opts, path: path}
	if opts.Detached && opts.LazyOpen {
		return c, nil
	}
	if err := c.openLocked(ctx); err != nil {
		return nil, err
	}
	d := c.db
	if !opts.Detached {
		if d.ReadOnly() {
			d.Close()
			return nil, fmt.Errorf("open: %w: a client that supervises its own jobs writes", ErrReadOnly)
		}
		cfg := supervisor.Config{
			DB:     d,
			Kind:   "embedded",
			Limits: c.limits(),
			Grace:  opts.Grace,

			FlushInterval: opts.FlushInterval,
		}
		// The helper of tmux jobs is the jobs binary, which an embedding
		// program is not: find it the way detached mode does, as an
		// absolute path (tmux runs it through sh, where jobs is a builtin).
		if exe, err := c.executable(); err == nil {
			if abs, err := exec.LookPath(exe); err == nil {
				cfg.Executable = abs
			}
		}
		if opts.OnExit != nil {
			cb := opts.OnExit
			cfg.OnExit = func(j db.Job) { cb(fromDB(j, time.Now())) }
		}
		sup, err := supervisor.New(cfg)
		if err != nil {
			d.Close()
			return nil, err
		}
		if err := sup.Open(ctx); err != nil {
			d.Close()
			return nil, err
		}
		c.sup = sup
	}
	return c, nil
}

func (c *Client) limits() db.Limits {
	return db.Limits{PerScope: c.opts.MaxRunningPerScope, Total: c.opts.MaxRunning}
}

// Scope returns the scope the client works in.
func (c *Client) Scope() string { return c.opts.Scope }

// WithScope opens another client on the same database, with the same
// options but scope. A front end that learns its scope after it opened
// the database (an MCP server, from its client's first message) carries
// on with it. The two clients are independent: close both.
func (c *Client) WithScope(ctx context.Context, scope string) (*Client, error) {
	if scope == "" {
		return nil, fmt.Errorf("open: %w: empty scope", ErrInvalid)
	}
	o := c.opts
	o.DB, o.Scope = c.path, scope
	return Open(ctx, o)
}

// DBPath returns the database path.
func (c *Client) DBPath() string { return c.path }

// Close releases the database. In-process mode first ends the jobs this
// client supervises, recording why. Methods called after Close return
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sup, conn, d := c.sup, c.conn, c.db
	c.mu.Unlock()
	var errs []error
	if sup != nil {
		errs = append(errs, sup.Close())
	}
	if conn != nil {
		errs = append(errs, conn.Close())
	}
	if d != nil {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// check rejects calls on a closed client or with a nil context, and opens
// the database if it is not open yet (LazyOpen). Every method that uses
// c.db calls it first.
func (c *Client) check(ctx context.Context) error { return c.guard(ctx, true) }

// openLocked opens the database unless it is open. The caller holds mu.
func (c *Client) openLocked(ctx context.Context) error {
	if c.db != nil {
		return nil
	}
	d, why, err := openDB(ctx, c.path, c.opts)
	if err != nil {
		return err
	}
	c.db, c.roWhy = d, why
	return nil
}

// openDB opens the database at path read-only or read-write, as opts ask
// (see Options.ReadOnly and Options.OnlyReads). why says what made a read
// open it read-only, for ErrReadOnly.
func openDB(ctx context.Context, path string, opts Options) (d *db.DB, why string, err error) {
	readOnly := opts.ReadOnly
	if !readOnly && opts.OnlyReads && !db.CanWrite(path) {
		readOnly, why = true, "this process cannot write it"
	}
	switch {
	case readOnly:
		d, err = db.OpenReadOnly(ctx, path)
		return d, why, err
	case opts.OnlyReads:
		// A read never migrates: a supervisor of an older jobs may
		// still be running on the database. Nor does it write to
		// another host's database (or a copy of one).
		d, foreign, err := db.OpenForReadsHere(ctx, path)
		if err != nil || !foreign {
			return d, "", err
		}
		d, err = db.OpenReadOnly(ctx, path)
		return d, "its supervisors ran on another host", err
	}
	d, err = db.Open(ctx, path)
	return d, "", err
}

// writable returns ErrReadOnly, naming the file, when the database is
// open read-only. Every call that writes checks it first.
func (c *Client) writable() error {
	if (c.db != nil && c.db.ReadOnly()) || (c.db == nil && c.opts.ReadOnly) {
		if c.roWhy != "" {
			return fmt.Errorf("%w: %s (%s)", ErrReadOnly, c.path, c.roWhy)
		}
		return fmt.Errorf("%w: %s", ErrReadOnly, c.path)
	}
	return nil
}

// readOnly reports whether the database is open read-only; the caller has
// checked the client (c.db is set).
func (c *Client) readOnly() bool { return c.db.ReadOnly() }

// usable is check without opening the database.
func (c *Client) usable(ctx context.Context) error { return c.guard(ctx, false) }

// guard is check, opening the database when open is set.
func (c *Client) guard(ctx context.Context, open bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case open:
		return c.openLocked(ctx)
	}
	return nil
}

// executable finds the jobs binary that runs detached supervisors.
func (c *Client) executable() (string, error) {
	if c.opts.Executable != "" {
		return c.opts.Executable, nil
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "jobs" {
		return exe, nil
	}
	if p := os.Getenv("JOBS_EXECUTABLE"); p != "" {
		return p, nil
	}
	return "jobs", nil
}

// starter is what can start a job: the in-process supervisor or a socket
// to a detached one.
type starter interface {
	Start(ctx context.Context, r protocol.StartRequest) (db.Job, error)
}

// starter returns what starts jobs. fallback skips the dial without the
// database, after it led to a connection that did not answer.
func (c *Client) starter(ctx context.Context, fallback bool) (starter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sup != nil {
		return c.sup, nil
	}
	if c.conn != nil {
		if err := c.conn.Ping(ctx); err == nil {
			return c.conn, nil
		}
		c.conn.Close()
		c.conn = nil
	}
	if c.db == nil && !fallback {
		// A warm supervisor needs no database on our side (LazyOpen);
		// when it does not answer, Start comes back with fallback set.
		if conn, err := protocol.DialDefault(ctx, c.path, ""); err == nil {
			c.conn = conn
			return conn, nil
		}
	}
	if err := c.openLocked(ctx); err != nil {
		return nil, err
	}
	// Check here what the new supervisor checks before it writes: it
	// would refuse to start, and its refusal reaches nobody (its output
	// goes to /dev/null), leaving us to time out waiting for it.
	if err := c.db.CheckForWriter(ctx); err != nil {
		return nil, err
	}
	exe, err := c.executable()
	if err != nil {
		return nil, err
	}
	conn, err := protocol.EnsureDefault(ctx, c.db, "", exe)
	if err != nil {
		return nil, err // EnsureDefault says "start supervisor: …"
	}
	c.conn = conn
	return conn, nil
}

// Start starts a job and returns it once its process runs (or failed to
// start: Status failed with Reason). When ctx ends while the job is being
// started, the job is killed and returned with an error wrapping ctx's:
// no job runs that its caller never heard of.
func (c *Client) Start(ctx context.Context, spec Spec) (Job, error) {
	if err := c.usable(ctx); err != nil {
		return Job{}, err
	}
	if err := c.writable(); err != nil {
		return Job{}, err
	}
	req, err := c.startRequest(spec)
	if err != nil {
		return Job{}, err
	}
	if req.Job.After, err = c.deps(ctx, spec); err != nil {
		return Job{}, err
	}
	s, err := c.starter(ctx, false)
	if err != nil {
		return Job{}, err
	}
	j, err := s.Start(ctx, req)
	if (errors.Is(err, vocab.ErrSupervisorClosed) || errors.Is(err, protocol.ErrNoAnswer)) && c.sup == nil {
		// The detached supervisor went idle between our ping and the
		// start, or the socket we dialled did not answer the ping sent
		// ahead of the request (so the request was not run): reach for
		// a new one, once.
		c.mu.Lock()
		if c.conn != nil {
			c.conn.Close()
			c.conn = nil
		}
		c.mu.Unlock()
		if s, err = c.starter(ctx, true); err != nil {
			return Job{}, err
		}
		j, err = s.Start(ctx, req)
	}
	if err == nil && ctx.Err() != nil && j.ID != "" {
		// Started as ctx ended: the caller is gone, so is the job (a
		// supervisor elsewhere kills it itself when ctx ends before its
		// answer: protocol.Conn.Start).
		_, kerr := c.kill(context.WithoutCancel(ctx), j, 0)
		err = ctx.Err()
		if kerr != nil {
			err = fmt.Errorf("%w (ending the job did not complete: %v)", err, kerr)
		}
	}
	if err != nil {
		if ctx.Err() != nil && j.ID != "" {
			// Started, and ended for its caller's sake.
			c.mu.Lock()
			d := c.db
			c.mu.Unlock()
			if d != nil {
				if cur, ferr := d.FindJobByID(context.WithoutCancel(ctx), j.ID); ferr == nil {
					j = cur
				}
			}
			return fromDB(j, time.Now()), fmt.Errorf("start: job %s was started and killed: %w", j.ID, err)
		}
		return Job{}, publicErr(spec.Name, err)
	}
	out := fromDB(j, time.Now())
	c.addPositions(ctx, []Job{out}, func(p int) { out.QueuePosition = p })
	return out, nil
}

func (c *Client) startRequest(spec Spec) (protocol.StartRequest, error) {
	var req protocol.StartRequest
	switch {
	case spec.Command != "" && len(spec.Argv) > 0:
		return req, fmt.Errorf("start: %w: set a command line or an argv, not both", ErrInvalid)
	case strings.TrimSpace(spec.Command) == "" && len(spec.Argv) == 0:
		return req, fmt.Errorf("start: %w: empty command", ErrInvalid)
	case len(spec.Argv) > 0 && spec.Argv[0] == "":
		return req, fmt.Errorf("start: %w: empty program name", ErrInvalid)
	}
	if err := checkText("name", spec.Name, MaxNameBytes); err != nil {
		return req, fmt.Errorf("start: %w", err)
	}
	if err := checkText("label", spec.Label, MaxLabelBytes); err != nil {
		return req, fmt.Errorf("start: %w", err)
	}
	if spec.Tmux && (spec.Queue != "" || len(spec.After) > 0 || len(spec.AfterOK) > 0) {
		// Its start is the tmux helper's, which a queue cannot hold back.
		return req, fmt.Errorf("start: %w: a tmux job cannot wait in a queue or for other jobs", ErrInvalid)
	}
	if spec.TimeoutGrace < 0 {
		return req, fmt.Errorf("start: %w: negative timeout grace", ErrInvalid)
	}
	if !validTmuxPrefix(spec.TmuxPrefix) {
		return req, fmt.Errorf("start: %w: a tmux session prefix has at most %d letters, digits, '-' or '_'", ErrInvalid, MaxTmuxPrefix)
	}
	for _, s := range append([]string{spec.Command, spec.Cwd, spec.OnExit}, spec.Argv...) {
		if strings.IndexByte(s, 0) >= 0 {
			return req, fmt.Errorf("start: %w: a command, argument or directory cannot contain NUL", ErrInvalid)
		}
	}
	// The supervisor runs elsewhere: it gets an absolute directory that
	// exists. Here, and nowhere else, is a start's directory resolved.
	cwd := spec.Cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return req, fmt.Errorf("start: working directory: %w", err)
		}
		cwd = wd
	} else if abs, err := filepath.Abs(cwd); err == nil {
		cwd = abs
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return req, fmt.Errorf("start: working directory %s does not exist or is not a directory", echo(cwd))
	}
	// A name given twice takes its last value (exec passes the environment
	// on in order and the last assignment wins) and is recorded once.
	names := make([]string, 0, len(spec.Env))
	seen := make(map[string]bool, len(spec.Env))
	for _, kv := range spec.Env {
		k, _, err := parse.EnvAssign(kv)
		if err != nil {
			return req, fmt.Errorf("start: %w: %v", ErrInvalid, err)
		}
		if !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	command := spec.Command
	argv := spec.Argv
	if command != "" {
		sh, err := shellPath(spec.Shell)
		if err != nil {
			return req, fmt.Errorf("start: %w", err)
		}
		argv = []string{sh, "-c", command}
	} else {
		command = textclean.ShellJoin(argv)
	}
	mode := vocab.ModePipe
	stdin := vocab.StdinPipe
	if spec.NoStdin {
		stdin = vocab.StdinNull
	}
	switch {
	case spec.Tmux && spec.PTY:
		return req, fmt.Errorf("start: %w: a job runs in tmux or in a pty, not both", ErrInvalid)
	case spec.Merge && (spec.Tmux || spec.PTY):
		return req, fmt.Errorf("start: %w: merge is for pipe jobs; a terminal has one stream already", ErrInvalid)
	case spec.PTY && spec.NoStdin:
		return req, fmt.Errorf("start: %w: a pty job's stdin is its terminal: it cannot be /dev/null", ErrInvalid)
	case spec.Cols < 0 || spec.Rows < 0 || spec.Cols > 0xffff || spec.Rows > 0xffff:
		return req, fmt.Errorf("start: %w: window size %dx%d out of range", ErrInvalid, spec.Cols, spec.Rows)
	case (spec.Cols > 0 || spec.Rows > 0) && !spec.PTY:
		return req, fmt.Errorf("start: %w: a window size is for pty jobs", ErrInvalid)
	case spec.Tmux:
		mode = vocab.ModeTmux
	case spec.PTY:
		mode = vocab.ModePTY
	}
	req = protocol.StartRequest{
		Job: db.NewJob{
			Scope:     c.opts.Scope,
			Name:      spec.Name,
			Label:     spec.Label,
			Command:   command,
			Argv:      argv,
			Cwd:       cwd,
			EnvNames:  names,
			Mode:      mode,
			Stdin:     stdin,
			Color:     spec.Color,
			OnExit:    spec.OnExit,
			Timeout:   pick(spec.Timeout, DefaultTimeout),
			TTL:       pick(spec.TTL, DefaultTTL),
			MaxOutput: pickN(spec.MaxOutput, DefaultMaxOutput),

			Queue:         spec.Queue,
			Priority:      spec.Priority,
			QueueOnLimit:  !spec.NoQueue && spec.MaxRunningInScope <= 0,
			RestartedFrom: spec.restartedFrom,
		},
		Env:          spec.Env,
		Replace:      spec.Replace,
		KeepTmux:     spec.KeepTmux,
		ScopeLimit:   max(spec.MaxRunningInScope, 0),
		LabelLimit:   max(spec.MaxRunningWithLabel, 0),
		TimeoutGrace: spec.TimeoutGrace,
		TmuxPrefix:   spec.TmuxPrefix,
		Cols:         spec.Cols,
		Rows:         spec.Rows,
		Merge:        spec.Merge,
	}
	return req, nil
}

// shellPath resolves Spec.Shell to the absolute path recorded in the argv.
func shellPath(name string) (string, error) {
	if name == "" {
		if p, err := exec.LookPath("bash"); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, nil
			}
		}
		return "/bin/sh", nil
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: a shell name cannot contain NUL", ErrInvalid)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: shell \"%s\" not found", ErrInvalid, echo(name))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: shell \"%s\": %v", ErrInvalid, echo(name), err)
	}
	return abs, nil
}

// pick maps the Spec convention (0 default, negative none) to storage (0
// none).
func pick(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func pickN(n, def int64) int64 {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// checkText applies the rule for scopes, names and labels: at most max
// bytes of valid UTF-8 without NUL.
func checkText(what, s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, more than the %d allowed", ErrInvalid, what, len(s), max)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s \"%s\" contains NUL", ErrInvalid, what, echo(s))
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s \"%s\" is not valid UTF-8", ErrInvalid, what, echo(s))
	}
	return nil
}
