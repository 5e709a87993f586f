package parse

import (
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/textclean"
)

// ErrInvalid matches every error this package returns, for errors.Is.
var ErrInvalid = errors.New("invalid input")

// Error is the error returned for input that cannot be read. Its message is
// one line: invalid <What> "<Input>": <Hint>, the input escaped and capped.
type Error struct {
	What  string // what was being read: "duration", "size", …
	Input string // the input as given
	Hint  string // what is wrong or what would be accepted
}

// Error echoes the input escaped and capped (textclean.Echo): input can be
// a megabyte long or hold escape sequences.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid %s \"%s\": %s", e.What, textclean.Echo(e.Input), e.Hint)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func invalid(what, input, hint string) error {
	return &Error{What: what, Input: input, Hint: hint}
}
