package jobs

import (
	"context"
	"errors"
	"io"
	"iter"
	"os"
	"path/filepath"
	"time"
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
	// Executable is the jobs binary used to start a detached supervisor;
	// empty means this program if it is jobs, else "jobs" from $PATH.
	Executable string
	// MaxRunningPerScope and MaxRunning cap running jobs (defaults 50
	// and 200).
	MaxRunningPerScope int
	MaxRunning         int
	// Grace is the default time between SIGTERM and SIGKILL (2 s).
	Grace time.Duration
	// OnExit is called once for each job this client supervises when it
	// reaches a terminal status (in-process mode).
	OnExit func(Job)
}

// Defaults for Options.
const (
	DefaultScope              = "default"
	DefaultMaxRunningPerScope = 50
	DefaultMaxRunning         = 200
	DefaultGrace              = 2 * time.Second
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

var errNotImplemented = errors.New("not implemented yet")

// Client is a handle on a jobs database for one scope. It is safe for
// concurrent use.
type Client struct {
	opts Options
}

// Open opens (creating and migrating when needed) the database and returns
// a client for opts.Scope.
func Open(ctx context.Context, opts Options) (*Client, error) {
	return nil, errNotImplemented
}

// Scope returns the scope the client works in.
func (c *Client) Scope() string { return c.opts.Scope }

// DBPath returns the database path.
func (c *Client) DBPath() string { return c.opts.DB }

// Close releases the database; in-process mode first ends the jobs this
// client supervises (recording why).
func (c *Client) Close() error { return errNotImplemented }

// Start starts a job and returns it once its process runs (or failed to
// start: Status failed with Reason).
func (c *Client) Start(ctx context.Context, spec Spec) (Job, error) {
	return Job{}, errNotImplemented
}

// Get returns a job by id, unique id prefix or name.
func (c *Client) Get(ctx context.Context, ref string) (Job, error) {
	return Job{}, errNotImplemented
}

// List returns the scope's jobs, newest first.
func (c *Client) List(ctx context.Context, f Filter) ([]Job, error) {
	return nil, errNotImplemented
}

// Poll returns a job's state and the cleaned tail of its output.
func (c *Client) Poll(ctx context.Context, ref string, o PollOptions) (PollResult, error) {
	return PollResult{}, errNotImplemented
}

// ReadNew returns the output produced since the previous ReadNew of the job
// (bounded by o.Tail characters, saying what it left out) and advances the
// job's read cursor, which is stored in the database.
func (c *Client) ReadNew(ctx context.Context, ref string, o PollOptions) (PollResult, error) {
	return PollResult{}, errNotImplemented
}

// Log reads part of a job's output.
func (c *Client) Log(ctx context.Context, ref string, r Range) (Output, error) {
	return Output{}, errNotImplemented
}

// Follow writes the job's output from r to w as it is produced, like
// tail -f, and returns when the job has finished and all output is
// written, or when ctx ends.
func (c *Client) Follow(ctx context.Context, ref string, r Range, w io.Writer) error {
	return errNotImplemented
}

// Write writes data to the job's stdin.
func (c *Client) Write(ctx context.Context, ref string, data []byte) error {
	return errNotImplemented
}

// CloseStdin closes the job's stdin (end of file for the job).
func (c *Client) CloseStdin(ctx context.Context, ref string) error {
	return errNotImplemented
}

// Kill ends the job's whole process tree: SIGTERM, grace (0 means the
// default), SIGKILL. Killing a finished job is not an error.
func (c *Client) Kill(ctx context.Context, ref string, grace time.Duration) (KillResult, error) {
	return KillResult{}, errNotImplemented
}

// KillAll kills every running job of the scope.
func (c *Client) KillAll(ctx context.Context, grace time.Duration) ([]KillResult, error) {
	return nil, errNotImplemented
}

// Signal sends one signal (a name such as "INT", "STOP", "CONT") to the
// job's processes and returns the pids signalled.
func (c *Client) Signal(ctx context.Context, ref string, sig string) ([]int, error) {
	return nil, errNotImplemented
}

// Wait blocks until the jobs finish (or one of them with o.Any), output
// matches o.Until, output is silent for o.Idle, or o.Timeout passes. It
// sleeps while it waits.
func (c *Client) Wait(ctx context.Context, refs []string, o WaitOptions) (WaitResult, error) {
	return WaitResult{}, errNotImplemented
}

// EventOptions shapes Events.
type EventOptions struct {
	// Since returns events after this cursor (an Event.ID).
	Since int64
	// Follow keeps the sequence open, yielding new events as they
	// happen, until ctx ends.
	Follow bool
	// AllScopes includes every scope's events.
	AllScopes bool
	// JobID keeps one job's events.
	JobID string
}

// Events yields the audit trail in order: every event once, none skipped,
// across supervisor restarts.
func (c *Client) Events(ctx context.Context, o EventOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) { yield(Event{}, errNotImplemented) }
}

// History returns a job's events, oldest first.
func (c *Client) History(ctx context.Context, ref string) ([]Event, error) {
	return nil, errNotImplemented
}

// Clear drops a job's stored output. Offsets stay absolute: what was
// cleared counts as evicted.
func (c *Client) Clear(ctx context.Context, ref string) error {
	return errNotImplemented
}

// Remove deletes a job, killing it first if it runs. Its events stay.
func (c *Client) Remove(ctx context.Context, ref string) (KillResult, error) {
	return KillResult{}, errNotImplemented
}

// GCResult says what a garbage collection removed.
type GCResult struct {
	Jobs   int   `json:"jobs_deleted"`
	Events int64 `json:"events_deleted"`
	Lost   int   `json:"jobs_lost"`
}

// GC runs the janitor now: marks jobs of dead supervisors lost, deletes
// finished jobs past their TTL and events past retention.
func (c *Client) GC(ctx context.Context) (GCResult, error) {
	return GCResult{}, errNotImplemented
}

// SendKeys sends tmux key names (Enter, C-c, Up …) to a tmux job, or the
// text as typed when literal is set.
func (c *Client) SendKeys(ctx context.Context, ref string, keys []string, literal bool) error {
	return errNotImplemented
}

// Capture returns a tmux job's screen as clean text, with up to scrollback
// lines of history above it.
func (c *Client) Capture(ctx context.Context, ref string, scrollback int) (string, error) {
	return "", errNotImplemented
}

// AttachCommand returns the argv that attaches a terminal to a tmux job's
// session.
func (c *Client) AttachCommand(ctx context.Context, ref string) ([]string, error) {
	return nil, errNotImplemented
}
