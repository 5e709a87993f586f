package vocab

// Status is where a job is in its life. The schema's CHECK constraint holds
// the same words, and a terminal status always has an end time.
type Status string

const (
	// StatusQueued: the job waits for its turn: a place in its queue, room
	// under the scope's running cap, or the end of the jobs it comes after.
	// No process exists yet; it moves to starting when its turn comes (or
	// to failed when a job it needed to succeed did not, or to killed).
	StatusQueued Status = "queued"

	// StatusStarting: the job row exists and its process is being started.
	// Every job that does not wait is created in this status.
	StatusStarting Status = "starting"

	// StatusRunning: the main process was started; pid, pgid and the start
	// time are recorded.
	StatusRunning Status = "running"

	// StatusDone: the main process exited with status 0 and its pipes are
	// drained.
	StatusDone Status = "done"

	// StatusFailed: the main process exited non-zero or died of a signal, or
	// it could not be started at all (the reason says why).
	StatusFailed Status = "failed"

	// StatusKilled: a kill verb ended the job.
	StatusKilled Status = "killed"

	// StatusTimedOut: the job ran past its timeout and was ended.
	StatusTimedOut Status = "timed_out"

	// StatusLost: the supervisor that owned the job died, so nobody records
	// its exit. Processes of a lost job may still run.
	StatusLost Status = "lost"
)

// Statuses lists the eight statuses in the order of a job's life.
var Statuses = []Status{StatusQueued, StatusStarting, StatusRunning, StatusDone, StatusFailed, StatusKilled, StatusTimedOut, StatusLost}

// Terminal reports whether s is a final status: the job has an end time and
// no further transition is allowed.
func (s Status) Terminal() bool {
	switch s {
	case StatusDone, StatusFailed, StatusKilled, StatusTimedOut, StatusLost:
		return true
	}
	return false
}

// Valid reports whether s is one of the eight statuses.
func (s Status) Valid() bool {
	return s == StatusQueued || s == StatusStarting || s == StatusRunning || s.Terminal()
}
