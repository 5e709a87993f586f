package runner

import (
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
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
	Error *vocab.WireError  `json:"error,omitempty"`
	Job   *db.Job           `json:"job,omitempty"`
	Kill  *vocab.KillResult `json:"kill,omitempty"`
	PIDs  []int             `json:"pids,omitempty"`
	// Written counts the bytes of a write's Data the job took, also when
	// the write failed part way.
	Written int `json:"written,omitempty"`
	// Supervisor and PID identify the supervisor (ping).
	Supervisor string `json:"supervisor,omitempty"`
	PID        int    `json:"pid,omitempty"`
}
