package runner

import "errors"

var (
	// ErrNotRunning means the job has finished (or its supervisor died), so
	// there is no live process to write to or signal.
	ErrNotRunning = errors.New("job is not running")

	// ErrStdinClosed means the job's stdin was closed with eof, was never a
	// pipe (Stdin "null"), or the job itself closed its end.
	ErrStdinClosed = errors.New("stdin is closed")

	// ErrNotReading means the job took none of the rest of a write to its
	// stdin within the write's idle bound: it is not reading (or reads
	// slower than one pipe buffer per bound). What it took before is
	// counted in the write's result.
	ErrNotReading = errors.New("the job is not reading its stdin")

	// ErrNoTmux means tmux is not available to this supervisor.
	ErrNoTmux = errors.New("tmux is not available")

	// ErrNotTmux means the verb works on tmux jobs only.
	ErrNotTmux = errors.New("not a tmux job")

	// ErrClosed means the supervisor is shutting down (idle exit or Close)
	// and takes no new jobs. A client that meets it on the default
	// supervisor can call EnsureDefault again: a new one is started.
	ErrClosed = errors.New("supervisor is closed")

	// ErrInvalid means a malformed request: empty command, bad signal name,
	// bad environment entry, negative grace.
	ErrInvalid = errors.New("invalid argument")

	// ErrPermission means the supervisor refused a connection from a
	// process of another user.
	ErrPermission = errors.New("permission denied")

	// ErrDefaultRunning is returned by Open for a Default supervisor when
	// another process already holds <runtime>/default.lock. `jobs
	// supervise` exits quietly on it: the other supervisor serves.
	ErrDefaultRunning = errors.New("a default supervisor is already running")
)

// invalidError keeps a readable message while matching ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// invalid marks err as an ErrInvalid without changing its message.
func invalid(err error) error { return &invalidError{err: err} }
