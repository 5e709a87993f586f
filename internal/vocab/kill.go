package vocab

import "time"

// Unlimited, in a setting where 0 means the default (a job's timeout, its
// TTL, its output cap), means none: no timeout, kept forever, no cap. The
// database stores none as 0; the conversion happens once, in pkg/jobs.
const Unlimited = -1

// NoGrace, as a kill's grace period, sends SIGKILL right after SIGTERM. A
// grace of 0 means the default (2 s unless configured); any other negative
// grace is invalid.
const NoGrace time.Duration = -1

// KillResult says what a kill did. A supervisor sends it over its socket as
// it is, and every front end reports it.
type KillResult struct {
	JobID string `json:"id"`
	// Status is the job's status after the kill.
	Status Status `json:"status"`
	// Signalled lists, sorted, the pids that were sent a signal.
	Signalled []int `json:"signalled"`
	// Survivors lists pids still alive after SIGKILL and the bounded wait;
	// normally empty.
	Survivors []int `json:"survivors"`
	// Escalated reports that something outlived the grace period and was
	// sent SIGKILL.
	Escalated bool `json:"escalated"`
	// AlreadyDone reports that the job had finished before the kill.
	// Signalled may still list processes it left behind (a grandchild
	// that outlived it, the processes of a lost job): a kill ends those
	// too.
	AlreadyDone bool `json:"already_done"`
	// Signal names the one signal sent when the kill asked for a signal
	// that does not end a job (INT, HUP, STOP …); empty for a kill.
	Signal string `json:"signal,omitempty"`
	// Unreached says which supervisor owns the job and did not answer
	// (stopped, hung): the job's processes were then ended directly, and
	// its status is recorded once that supervisor runs again. Empty when
	// the owner answered or there is none.
	Unreached string `json:"unreached,omitempty"`
}
