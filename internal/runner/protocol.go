package runner

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// Socket protocol: the client writes one JSON Request per line, the
// supervisor answers each with one JSON Response per line, in order, on
// the same connection.

// Ops of the socket protocol.
const (
	OpStart      = "start"
	OpWrite      = "write"
	OpCloseStdin = "close_stdin"
	OpKill       = "kill"
	OpSignal     = "signal"
	OpSendKeys   = "send_keys"
	OpFlush      = "flush"
	OpPing       = "ping"
)

// Request is one call over the socket.
type Request struct {
	Op    string        `json:"op"`
	JobID string        `json:"job_id,omitempty"`
	Start *StartRequest `json:"start,omitempty"`
	// Data is written to stdin (base64 in JSON, so any bytes pass).
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
	// Idle bounds a write: it gives up when the job takes no byte of Data
	// for this long; 0 means no bound.
	Idle time.Duration `json:"idle,omitempty"`
	// Grace for kill; 0 means the supervisor's default.
	Grace   time.Duration `json:"grace,omitempty"`
	Signal  string        `json:"signal,omitempty"`
	Keys    []string      `json:"keys,omitempty"`
	Literal bool          `json:"literal,omitempty"`
	// CallerPID is never signalled by kill or signal.
	CallerPID int `json:"caller_pid,omitempty"`
}

// Response answers a Request. Error is set when the call failed.
type Response struct {
	Error *WireError  `json:"error,omitempty"`
	Job   *db.Job     `json:"job,omitempty"`
	Kill  *KillResult `json:"kill,omitempty"`
	PIDs  []int       `json:"pids,omitempty"`
	// Written counts the bytes of a write's Data the job took, also when
	// the write failed part way.
	Written int `json:"written,omitempty"`
	// Supervisor and PID identify the supervisor (ping).
	Supervisor string `json:"supervisor,omitempty"`
	PID        int    `json:"pid,omitempty"`
}

// WireError is an error as it crosses the socket: a code that names the
// sentinel it wraps, the full message, and for typed errors their fields.
type WireError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// Error codes, in the order they are tried when encoding.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_found", db.ErrNotFound},
	{"ambiguous", db.ErrAmbiguous},
	{"name_taken", db.ErrNameTaken},
	{"limit", db.ErrLimit},
	{"invalid_transition", db.ErrInvalidTransition},
	{"not_running", ErrNotRunning},
	{"stdin_closed", ErrStdinClosed},
	{"not_reading", ErrNotReading},
	{"no_tmux", ErrNoTmux},
	{"not_tmux", ErrNotTmux},
	{"closed", ErrClosed},
	{"invalid", ErrInvalid},
	{"default_running", ErrDefaultRunning},
	{"permission", ErrPermission},
	{"corrupt", db.ErrCorrupt},
	{"replaced", db.ErrReplaced},
}

// encodeError turns err into its wire form.
func encodeError(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Code: "error", Message: err.Error()}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			w.Code = c.code
			break
		}
	}
	var (
		nameTaken *db.NameTakenError
		limit     *db.LimitError
		ambiguous *db.AmbiguousError
		corrupt   *db.CorruptError
		replaced  *db.ReplacedError
	)
	switch {
	case errors.As(err, &nameTaken):
		w.Detail, _ = json.Marshal(nameTaken)
	case errors.As(err, &limit):
		w.Detail, _ = json.Marshal(limit)
	case errors.As(err, &ambiguous):
		w.Detail, _ = json.Marshal(ambiguous)
	case errors.As(err, &corrupt):
		w.Detail, _ = json.Marshal(corrupt)
	case errors.As(err, &replaced):
		w.Detail, _ = json.Marshal(replaced)
	}
	return w
}

// Err turns the wire form back into an error with the same message that
// matches the same sentinel (and, for db's typed errors, errors.As finds
// the same fields).
func (w *WireError) Err() error {
	if w == nil {
		return nil
	}
	var inner error
	switch w.Code {
	case "name_taken":
		e := &db.NameTakenError{}
		if json.Unmarshal(w.Detail, e) == nil && len(w.Detail) > 0 {
			inner = e
		}
	case "limit":
		e := &db.LimitError{}
		if json.Unmarshal(w.Detail, e) == nil && len(w.Detail) > 0 {
			inner = e
		}
	case "ambiguous":
		e := &db.AmbiguousError{}
		if json.Unmarshal(w.Detail, e) == nil && len(w.Detail) > 0 {
			inner = e
		}
	case "corrupt":
		e := &db.CorruptError{}
		if json.Unmarshal(w.Detail, e) == nil && len(w.Detail) > 0 {
			inner = e
		}
	case "replaced":
		e := &db.ReplacedError{}
		if json.Unmarshal(w.Detail, e) == nil && len(w.Detail) > 0 {
			inner = e
		}
	}
	if inner == nil {
		for _, c := range errorCodes {
			if c.code == w.Code {
				inner = c.err
				break
			}
		}
	}
	return &remoteError{msg: w.Message, err: inner}
}

// remoteError is an error that happened in another process: its message
// as it was there, matching the sentinel it wrapped there.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }
