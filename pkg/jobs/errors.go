package jobs

import (
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Sentinel errors. Every error returned by a Client method that means one of
// these wraps it, so errors.Is works; the message names the job
// ("job 7fq2 not found").
var (
	// ErrNotFound means no job of the client's scope matches the id,
	// prefix or name. A job of another scope is not found either.
	ErrNotFound = vocab.ErrNotFound
	// ErrAmbiguous means an id prefix matches several jobs; the message
	// lists them.
	ErrAmbiguous = vocab.ErrAmbiguous
	// ErrNotRunning means the verb needs a running job and the job has
	// finished.
	ErrNotRunning = vocab.ErrNotRunning
	// ErrStdinClosed means the job's stdin was closed (or was never a
	// pipe).
	ErrStdinClosed = vocab.ErrStdinClosed
	// ErrNotReading means a Write gave up: the job took none of the rest of
	// the data within the client's WriteTimeout. Write's count says how
	// much it took before.
	// The error is a *NotReadingError with the counts.
	ErrNotReading = vocab.ErrNotReading
	// ErrLimit means starting would pass the running-jobs limit of the
	// scope or of the database. Nothing is evicted to make room.
	ErrLimit = vocab.ErrLimit
	// ErrNameTaken means an active job of the scope already has the name.
	ErrNameTaken = vocab.ErrNameTaken
	// ErrInvalidTransition means a status change that the job model does
	// not allow (for instance from a terminal status).
	ErrInvalidTransition = vocab.ErrInvalidTransition
	// ErrNotTmux means the verb works on tmux jobs only.
	ErrNotTmux = vocab.ErrNotTmux
	// ErrNoTmux means tmux is not installed.
	ErrNoTmux = vocab.ErrNoTmux
	// ErrClosed means the Client was closed.
	ErrClosed = vocab.ErrClosed
	// ErrInvalid means an argument is malformed (bad regex, negative
	// offset, empty command …).
	ErrInvalid = vocab.ErrInvalid
	// ErrCorrupt means SQLite found the database file damaged or not a
	// database. The error is a *CorruptError ("database corrupt: PATH:
	// cause"), from whichever call met the damage; nothing is written to
	// the file and no job starts.
	ErrCorrupt = vocab.ErrCorrupt
	// ErrReplaced means the database file was removed or replaced while a
	// supervisor had it open; that supervisor takes no new job. The error
	// is a *ReplacedError. Starting again reaches a supervisor of the file
	// now at the path.
	ErrReplaced = vocab.ErrReplaced
	// ErrReadOnly means the call would write to a database opened
	// read-only (Options.ReadOnly, or a read of a file this process cannot
	// write or of another host's database).
	ErrReadOnly = vocab.ErrReadOnly
	// ErrTooNew means the database was written by a newer version of jobs.
	ErrTooNew = vocab.ErrTooNew
	// ErrTooOld means a client that only reads (Options.OnlyReads) found
	// the database's schema older than this version's: reads never
	// migrate, since a supervisor of the older version may still run on
	// it. A client that writes upgrades it.
	ErrTooOld = vocab.ErrTooOld
	// ErrNotJobs means the file holds another program's tables and no
	// jobs schema; nothing was written to it.
	ErrNotJobs = vocab.ErrNotJobs
)

// echo is how an error message repeats what the caller gave (an id, a
// name, a pattern): control characters escaped and cut to a few dozen
// characters, so a megabyte of input cannot make a megabyte of error or
// drive the terminal that prints it.
func echo(s string) string { return textclean.Echo(s) }

// CorruptError names the damaged database file and SQLite's words for the
// damage.
type CorruptError = vocab.CorruptError

// ReplacedError names the database path whose file was removed or replaced.
type ReplacedError = vocab.ReplacedError

// NotReadingError is the error of a Write that gave up: how much the job
// took of the data and for how long it then took nothing. It wraps
// ErrNotReading.
type NotReadingError = vocab.NotReadingError
