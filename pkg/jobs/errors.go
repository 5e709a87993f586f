package jobs

import (
	"errors"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/textclean"
)

// Sentinel errors. Every error returned by a Client method that means one of
// these wraps it, so errors.Is works; the message names the job
// ("job 7fq2 not found").
var (
	// ErrNotFound means no job of the client's scope matches the id,
	// prefix or name. A job of another scope is not found either.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous means an id prefix matches several jobs; the message
	// lists them.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrNotRunning means the verb needs a running job and the job has
	// finished.
	ErrNotRunning = errors.New("not running")
	// ErrStdinClosed means the job's stdin was closed (or was never a
	// pipe).
	ErrStdinClosed = errors.New("stdin is closed")
	// ErrNotReading means a Write gave up: the job took none of the rest of
	// the data within the client's WriteTimeout. Write's count says how
	// much it took before.
	ErrNotReading = errors.New("not reading its stdin")
	// ErrLimit means starting would pass the running-jobs limit of the
	// scope or of the database. Nothing is evicted to make room.
	ErrLimit = errors.New("too many running jobs")
	// ErrNameTaken means an active job of the scope already has the name.
	ErrNameTaken = errors.New("name taken")
	// ErrInvalidTransition means a status change that the job model does
	// not allow (for instance from a terminal status).
	ErrInvalidTransition = errors.New("invalid status transition")
	// ErrNotTmux means the verb works on tmux jobs only.
	ErrNotTmux = errors.New("not a tmux job")
	// ErrNoTmux means tmux is not installed.
	ErrNoTmux = errors.New("tmux is not installed")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("client is closed")
	// ErrInvalid means an argument is malformed (bad regex, negative
	// offset, empty command …).
	ErrInvalid = errors.New("invalid argument")
	// ErrCorrupt means SQLite found the database file damaged or not a
	// database. The error is a *CorruptError ("database corrupt: PATH:
	// cause"), from whichever call met the damage; nothing is written to
	// the file and no job starts.
	ErrCorrupt = db.ErrCorrupt
	// ErrReplaced means the database file was removed or replaced while a
	// supervisor had it open; that supervisor takes no new job. The error
	// is a *ReplacedError. Starting again reaches a supervisor of the file
	// now at the path.
	ErrReplaced = db.ErrReplaced
	// ErrReadOnly means the call would write to a database opened
	// read-only (Options.ReadOnly, or a read of a file this process cannot
	// write or of another host's database).
	ErrReadOnly = db.ErrReadOnly
)

// echo is how an error message repeats what the caller gave (an id, a
// name, a pattern): control characters escaped and cut to a few dozen
// characters, so a megabyte of input cannot make a megabyte of error or
// drive the terminal that prints it.
func echo(s string) string { return textclean.Echo(s) }

// CorruptError names the damaged database file and SQLite's words for the
// damage.
type CorruptError = db.CorruptError

// ReplacedError names the database path whose file was removed or replaced.
type ReplacedError = db.ReplacedError
