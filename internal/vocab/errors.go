package vocab

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. An error that means one of these wraps it, in whichever
// layer it was made, so errors.Is works on what any front end returns; the
// message names the job ("job 7fq2 not found").
var (
	// ErrNotFound means no job (or supervisor) matches. A job of another
	// scope is not found, exactly like a job that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous means an id prefix matches several jobs; the error is
	// an *AmbiguousError naming them.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrNameTaken means an active job of the scope already has the name;
	// the error is a *NameTakenError naming it.
	ErrNameTaken = errors.New("name taken")
	// ErrLimit means starting would pass the running-jobs limit of the
	// scope or of the database; the error is a *LimitError. Nothing is
	// evicted to make room.
	ErrLimit = errors.New("too many running jobs")
	// ErrInvalidTransition means a status change the job model does not
	// allow, such as done → running; the message names both statuses.
	ErrInvalidTransition = errors.New("invalid status transition")
	// ErrNotRunning means the verb needs a live process and the job has
	// finished (or its supervisor died).
	ErrNotRunning = errors.New("not running")
	// ErrStdinClosed means the job's stdin was closed with eof, was never
	// a pipe, or the job itself closed its end.
	ErrStdinClosed = errors.New("stdin is closed")
	// ErrNotReading means a write gave up: the job took none of the rest of
	// the data within the write's idle bound. The write's count says how
	// much it took before.
	ErrNotReading = errors.New("not reading its stdin")
	// ErrNoTmux means tmux is not installed where the job would run.
	ErrNoTmux = errors.New("tmux is not installed")
	// ErrNotTmux means the verb works on tmux jobs only.
	ErrNotTmux = errors.New("not a tmux job")
	// ErrInvalid means a malformed request: an empty command, a bad
	// regular expression, a negative offset, a bad signal name.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("client is closed")
	// ErrSupervisorClosed means the supervisor is shutting down (idle exit
	// or Close) and takes no new jobs; a client may start another.
	ErrSupervisorClosed = errors.New("supervisor is closed")
	// ErrPermission means a supervisor refused a connection from a process
	// of another user.
	ErrPermission = errors.New("permission denied")
	// ErrDefaultRunning means another process already serves as the
	// default supervisor of the database.
	ErrDefaultRunning = errors.New("a default supervisor is already running")
	// ErrCorrupt means SQLite found the database file damaged or not a
	// database at all; the error is a *CorruptError naming the file.
	// Nothing is written to a file found corrupt.
	ErrCorrupt = errors.New("database corrupt")
	// ErrReplaced means the database file was removed or replaced by
	// another file at the same path while it was open; the error is a
	// *ReplacedError naming the path.
	ErrReplaced = errors.New("database removed or replaced")
	// ErrReadOnly means the call would write to a database opened
	// read-only.
	ErrReadOnly = errors.New("database is open read-only")
	// ErrTooNew means the database's schema is newer than this binary.
	ErrTooNew = errors.New("database schema is newer than this version of jobs")
	// ErrTooOld means a read found the database's schema older than this
	// binary's: reads never migrate (a supervisor of the older version may
	// still be running on it); a writer (start, supervise) upgrades it.
	ErrTooOld = errors.New("database schema is older than this version of jobs")
	// ErrNotJobs means the file holds another program's tables and no
	// jobs schema: jobs sets up only a new or empty file, and writes
	// nothing to this one.
	ErrNotJobs = errors.New("not a jobs database")
	// ErrDiskFull is why output is dropped when the database's file system
	// is (nearly) full.
	ErrDiskFull = errors.New("disk full")
)

// AmbiguousError is returned when a reference is a prefix of several job
// ids in the scope.
type AmbiguousError struct {
	Ref        string   `json:"ref"`
	Candidates []string `json:"candidates"` // matching ids, oldest first; a few at most
}

// Error names the candidates so that the user can pick one.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("job %s is ambiguous: matches %s", e.Ref, strings.Join(e.Candidates, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// NotReadingError is returned when a write gave up because the job took
// none of the rest of the data for Idle: Took of Size bytes went in.
type NotReadingError struct {
	Ref  string        `json:"ref"`
	Took int           `json:"took"`
	Size int           `json:"size"`
	Idle time.Duration `json:"idle"`
}

// Error says how much the job took and for how long it then took nothing.
func (e *NotReadingError) Error() string {
	return fmt.Sprintf("job %s is %s: %s", e.Ref, ErrNotReading, e.Detail())
}

// Detail is the error without the job: "it took N of M bytes, then none
// for D", for front ends that name the job their own way.
func (e *NotReadingError) Detail() string {
	return fmt.Sprintf("it took %d of %d bytes, then none for %s", e.Took, e.Size, e.Idle)
}

// Is makes errors.Is(err, ErrNotReading) true.
func (e *NotReadingError) Is(target error) bool { return target == ErrNotReading }

// NameTakenError is returned when an active job of the scope already has
// the requested name.
type NameTakenError struct {
	Name string `json:"name"`
	ID   string `json:"id"` // the active job that holds the name
}

// Error names the job that holds the name.
func (e *NameTakenError) Error() string {
	return fmt.Sprintf("name %q is taken by active job %s", e.Name, e.ID)
}

// Is makes errors.Is(err, ErrNameTaken) true.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// LimitError is returned when starting one more job would pass a
// running-job limit. Starting jobs count as running.
type LimitError struct {
	Scope   string `json:"scope"`
	Running int    `json:"running"` // active jobs now (in Scope, or in all scopes when Total)
	Max     int    `json:"max"`     // the limit that was hit
	Total   bool   `json:"total"`   // the limit over all scopes, not the per-scope one
	// Label is set when the limit hit is the one on the scope's jobs
	// with this label (a start's LabelLimit), not the scope's.
	Label string `json:"label,omitempty"`
}

// Error says which limit was hit.
func (e *LimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("too many running jobs: %d of at most %d in all scopes", e.Running, e.Max)
	}
	if e.Label != "" {
		return fmt.Sprintf("too many running jobs: %d of at most %d with label %q in scope %q", e.Running, e.Max, e.Label, e.Scope)
	}
	return fmt.Sprintf("too many running jobs: %d of at most %d in scope %q", e.Running, e.Max, e.Scope)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// CorruptError is what any statement, an open and the start-up check of a
// supervisor return when SQLite reports the database corrupt.
type CorruptError struct {
	Path  string `json:"path"`
	Cause string `json:"cause"` // SQLite's own words, or what the check found
}

// Error reads "database corrupt: PATH: cause".
func (e *CorruptError) Error() string {
	if e.Cause == "" {
		return "database corrupt: " + e.Path
	}
	return "database corrupt: " + e.Path + ": " + e.Cause
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ReplacedError names the database path whose file was removed or replaced
// while a supervisor had it open.
type ReplacedError struct {
	Path string `json:"path"`
}

// Error says what happened and what to do.
func (e *ReplacedError) Error() string {
	return "database " + e.Path + " was removed or replaced while the supervisor ran; start again"
}

// Is makes errors.Is(err, ErrReplaced) true.
func (e *ReplacedError) Is(target error) bool { return target == ErrReplaced }

// WireError is an error as it crosses a supervisor's socket: a code that
// names the sentinel it wraps, the full message, and for the typed errors
// their fields.
type WireError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// wireCodes are the sentinels that cross the socket, in the order they are
// tried when encoding, with the typed error that carries each one's
// details.
var wireCodes = []struct {
	code  string
	err   error
	typed *typedWire
}{
	{"not_found", ErrNotFound, nil},
	{"ambiguous", ErrAmbiguous, typed[AmbiguousError]()},
	{"name_taken", ErrNameTaken, typed[NameTakenError]()},
	{"limit", ErrLimit, typed[LimitError]()},
	{"invalid_transition", ErrInvalidTransition, nil},
	{"not_running", ErrNotRunning, nil},
	{"stdin_closed", ErrStdinClosed, nil},
	{"not_reading", ErrNotReading, nil},
	{"no_tmux", ErrNoTmux, nil},
	{"not_tmux", ErrNotTmux, nil},
	{"closed", ErrSupervisorClosed, nil},
	{"invalid", ErrInvalid, nil},
	{"default_running", ErrDefaultRunning, nil},
	{"permission", ErrPermission, nil},
	{"corrupt", ErrCorrupt, typed[CorruptError]()},
	{"replaced", ErrReplaced, typed[ReplacedError]()},
	{"read_only", ErrReadOnly, nil},
	{"disk_full", ErrDiskFull, nil},
}

// typedWire finds a typed error in an error chain and decodes its fields.
type typedWire struct {
	find   func(error) error
	decode func([]byte) error
}

func typed[T any, P interface {
	*T
	error
}]() *typedWire {
	return &typedWire{
		find: func(err error) error {
			var p P
			if errors.As(err, &p) {
				return p
			}
			return nil
		},
		decode: func(b []byte) error {
			p := P(new(T))
			if json.Unmarshal(b, p) != nil {
				return nil
			}
			return p
		},
	}
}

// EncodeError turns err into its wire form; nil stays nil.
func EncodeError(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Code: "error", Message: err.Error()}
	for _, c := range wireCodes {
		if !errors.Is(err, c.err) {
			continue
		}
		w.Code = c.code
		if c.typed != nil {
			if typed := c.typed.find(err); typed != nil {
				w.Detail, _ = json.Marshal(typed)
			}
		}
		break
	}
	return w
}

// Err turns the wire form back into an error with the same message that
// matches the same sentinel, and for a typed error one errors.As finds with
// the same fields.
func (w *WireError) Err() error {
	if w == nil {
		return nil
	}
	var inner error
	for _, c := range wireCodes {
		if c.code != w.Code {
			continue
		}
		inner = c.err
		if c.typed != nil && len(w.Detail) > 0 {
			if typed := c.typed.decode(w.Detail); typed != nil {
				inner = typed
			}
		}
		break
	}
	return &remoteError{msg: w.Message, err: inner}
}

// remoteError is an error that happened in another process: its message as
// it was there, matching the sentinel it wrapped there.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }
