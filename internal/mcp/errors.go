package mcp

import (
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// sessionError is a tool error about one job, worded as the original interfaces word it:
// "Session X not found", "Session X is not running", "Session X stdin is
// not available". It is a type rather than a formatted string because the
// original interfaces' messages start with a capital letter, which Go error strings
// otherwise avoid.
type sessionError struct {
	ref  string
	what string
	err  error
}

// Error echoes the reference as textclean.Echo does: escaped and capped, so
// a megabyte of id comes back as one short line.
func (e *sessionError) Error() string { return "Session " + textclean.Echo(e.ref) + " " + e.what }
func (e *sessionError) Unwrap() error { return e.err }

// describe turns a jobs error about the job ref into the error the model
// reads. Errors that name their own cause (ambiguous prefix, bad regex,
// limits) pass through.
func describe(ref string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jobs.ErrNotFound):
		return &sessionError{ref, "not found", err}
	case errors.Is(err, jobs.ErrNotRunning):
		return &sessionError{ref, "is not running", err}
	case errors.Is(err, jobs.ErrNotReading):
		return &sessionError{ref, "is not reading its stdin: " + notReadingDetail(err) + "; see its output with action=poll, or close its stdin with eof=true", err}
	case errors.Is(err, jobs.ErrStdinClosed):
		return &sessionError{ref, "stdin is not available", err}
	case errors.Is(err, jobs.ErrNotTmux):
		return &sessionError{ref, "is not a tmux job: send_keys and capture need execute_command with tmux=true (use action=write for stdin, action=log for output)", err}
	case errors.Is(err, jobs.ErrNoTmux):
		return fmt.Errorf("tmux is not installed: run the command without tmux=true: %w", err)
	}
	// The database's own state is said in the same words by every tool,
	// without the verbs it passed through.
	var corrupt *jobs.CorruptError
	var replaced *jobs.ReplacedError
	switch {
	case errors.As(err, &corrupt):
		return corrupt
	case errors.As(err, &replaced):
		return replaced
	}
	return err
}

// argError is a tool error about the arguments.
func argError(format string, a ...any) error {
	return fmt.Errorf(format, a...)
}

// notReadingDetail is what a write that gave up took and for how long the
// job then took nothing, from the typed error when there is one.
func notReadingDetail(err error) string {
	var nr *jobs.NotReadingError
	if errors.As(err, &nr) {
		return nr.Detail()
	}
	return "it took nothing"
}
