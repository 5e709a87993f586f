package protocol

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
	OpSync       = "sync"
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

// Environment variables every job sees.
const (
	// EnvJobID tags every process of a job (JOBS_ID=<id>): kill finds
	// the ones that left the process group by it.
	EnvJobID = "JOBS_ID"
	// EnvHookOf marks an on_exit hook of a job (JOBS_HOOK=<id>, beside
	// the job's JOBS_ID, which the hook sees too): the job's kill leaves
	// the hook and its children alone, though they carry its tag.
	EnvHookOf = "JOBS_HOOK"
	// EnvScope is the job's scope, so that `jobs` run inside a job stays
	// in its scope.
	EnvScope = "JOBS_SCOPE"
)

// StartRequest asks a supervisor to start a job.
type StartRequest struct {
	// Job describes the job. One command string in Command runs as
	// `/bin/sh -c Command`; a non-empty Argv runs directly (Command is then
	// only its display form, derived when empty). Cwd "" means the
	// supervisor's working directory (Conn fills in the caller's). Scope ""
	// means "default"; Stdin "" means "pipe", "null" (or "closed") gives
	// /dev/null. ID and SupervisorID are filled in.
	Job db.NewJob `json:"job"`
	// Env holds "K=V" additions; only the names are stored (Job.EnvNames
	// is derived from them when empty).
	Env []string `json:"env,omitempty"`
	// BaseEnv is the environment the additions go on top of; nil means the
	// supervisor's own. Conn sends the caller's, so that a job started
	// through a detached supervisor sees the caller's PATH.
	BaseEnv []string `json:"base_env,omitempty"`
	// Replace ends the active job of the scope with the same Name first
	// (otherwise the start fails with vocab.ErrNameTaken).
	Replace bool `json:"replace,omitempty"`
	// KeepTmux keeps a tmux job's session after it ends (tmux mode).
	KeepTmux bool `json:"keep_tmux,omitempty"`
	// ScopeLimit, when set, is this start's cap on the scope's running
	// jobs instead of the supervisor's; LabelLimit caps the scope's
	// running jobs with the job's label (db.Limits.PerLabel). The cap on
	// all scopes stays the supervisor's. A supervisor older than these
	// fields applies its own per-scope cap.
	ScopeLimit int `json:"scope_limit,omitempty"`
	LabelLimit int `json:"label_limit,omitempty"`
	// TimeoutGrace is the time between SIGTERM and SIGKILL when the
	// job's timeout ends it; 0 means the supervisor's grace.
	TimeoutGrace time.Duration `json:"timeout_grace,omitempty"`
	// TmuxPrefix starts a tmux job's session name (the id follows); ""
	// means "jobs-".
	TmuxPrefix string `json:"tmux_prefix,omitempty"`
	// Cols and Rows are a pty job's window size; 0 means DefaultCols or
	// DefaultRows.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Merge gives a pipe job one pipe as both stdout and stderr, read in
	// the order the job wrote, and stored as stream stdout.
	Merge bool `json:"merge,omitempty"`
}

// A pty job's window size when the request gives none: what terminals
// open with.
const (
	DefaultCols = 80
	DefaultRows = 24
)
