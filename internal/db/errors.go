package db

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound means no job (or supervisor) matches. A job of another
	// scope is not found, exactly like a job that does not exist.
	ErrNotFound = errors.New("not found")

	// ErrInvalidTransition means a status change that the state machine does
	// not allow, such as done → running. The wrapping error names both
	// statuses.
	ErrInvalidTransition = errors.New("invalid status transition")

	// ErrAmbiguous means an id prefix matches several jobs; the error is an
	// *AmbiguousError naming them.
	ErrAmbiguous = errors.New("ambiguous job reference")

	// ErrNameTaken means an active job of the scope already has the name; the
	// error is a *NameTakenError naming it.
	ErrNameTaken = errors.New("name taken")

	// ErrLimit means too many jobs are running; the error is a *LimitError.
	ErrLimit = errors.New("too many running jobs")
)

// AmbiguousError is returned by FindJob when a reference is a prefix of
// several job ids in the scope.
type AmbiguousError struct {
	Ref        string
	Candidates []string // matching ids, oldest first; at most maxCandidates
}

// Error names the candidates so that the user can pick one.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("job %s is ambiguous: matches %s", e.Ref, strings.Join(e.Candidates, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// NameTakenError is returned by CreateJob when an active job of the scope
// already has the requested name.
type NameTakenError struct {
	Name string
	ID   string // the active job that holds the name
}

// Error names the job that holds the name.
func (e *NameTakenError) Error() string {
	return fmt.Sprintf("name %q is taken by active job %s", e.Name, e.ID)
}

// Is makes errors.Is(err, ErrNameTaken) true.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// LimitError is returned by CreateJob when starting one more job would pass
// a running-job limit. Starting jobs count as running.
type LimitError struct {
	Scope   string
	Running int  // active jobs now (in Scope, or in all scopes when Total)
	Max     int  // the limit that was hit
	Total   bool // the limit over all scopes, not the per-scope one
}

// Error says which limit was hit.
func (e *LimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("too many running jobs: %d of at most %d in all scopes", e.Running, e.Max)
	}
	return fmt.Sprintf("too many running jobs: %d of at most %d in scope %q", e.Running, e.Max, e.Scope)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// ErrCorrupt means SQLite found the database file damaged (SQLITE_CORRUPT)
// or not a database at all (SQLITE_NOTADB). The error is a *CorruptError
// naming the file. Nothing is written to a file found corrupt.
var ErrCorrupt = errors.New("database corrupt")

// CorruptError is what any statement, the open and the start-up check of a
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

// ErrReplaced means the database file was removed or replaced by another
// file at the same path while it was open: what is written through the open
// handle no longer reaches the file at the path. The error is a
// *ReplacedError naming the path.
var ErrReplaced = errors.New("database removed or replaced")

// ReplacedError is returned by CheckFile, and by a supervisor asked to start
// a job after it noticed the replacement.
type ReplacedError struct {
	Path string `json:"path"`
}

// Error says what happened and what to do.
func (e *ReplacedError) Error() string {
	return "database " + e.Path + " was removed or replaced while the supervisor ran; start again"
}

// Is makes errors.Is(err, ErrReplaced) true.
func (e *ReplacedError) Is(target error) bool { return target == ErrReplaced }
