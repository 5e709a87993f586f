package supervisor

import "github.com/agentjobs/jobs/internal/vocab"

// invalidError keeps a readable message while matching vocab.ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == vocab.ErrInvalid }

// invalid marks err as an vocab.ErrInvalid without changing its message.
func invalid(err error) error { return &invalidError{err: err} }
