package tmuxjob

import (
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/vocab"
)

// invalidError keeps a readable message while matching vocab.ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == vocab.ErrInvalid }

// invalid marks err as an vocab.ErrInvalid without changing its message.
func invalid(err error) error { return &invalidError{err: err} }

// noTmuxError keeps tmux's own explanation (not installed, too old, with
// the way out) while matching vocab.ErrNoTmux.
type noTmuxError struct{ err error }

func (e *noTmuxError) Error() string        { return e.err.Error() }
func (e *noTmuxError) Unwrap() error        { return e.err }
func (e *noTmuxError) Is(target error) bool { return target == vocab.ErrNoTmux }

// NoTmux marks err, tmux's refusal to serve (not installed, too old), as
// vocab.ErrNoTmux without changing its message.
func NoTmux(err error) error { return &noTmuxError{err} }

// tmuxError turns a tmux error about job j into the vocabulary:
// a missing tmux is vocab.ErrNoTmux, a session that has gone is vocab.ErrNotRunning.
func tmuxError(j db.Job, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tmux.ErrNotInstalled):
		return &noTmuxError{err}
	case errors.Is(err, tmux.ErrNoSession):
		return fmt.Errorf("its tmux session %s is gone: %w", j.TmuxSession, vocab.ErrNotRunning)
	}
	return err
}
