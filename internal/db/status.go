package db

import "github.com/agentjobs/jobs/internal/vocab"

// The statuses are vocab.Status; the moves between them are the database's
// rule (Transition).

// allowedMoves lists every transition Transition accepts.
var allowedMoves = map[vocab.Status][]vocab.Status{
	// A queued job has no process: it starts, fails without one (a
	// dependency failed) or is killed before its turn.
	vocab.StatusQueued:   {vocab.StatusStarting, vocab.StatusFailed, vocab.StatusKilled},
	vocab.StatusStarting: {vocab.StatusRunning, vocab.StatusFailed, vocab.StatusKilled, vocab.StatusLost},
	vocab.StatusRunning:  {vocab.StatusDone, vocab.StatusFailed, vocab.StatusKilled, vocab.StatusTimedOut, vocab.StatusLost},
}

// canMove reports whether a job may go from one status to another.
func canMove(from, to vocab.Status) bool {
	for _, s := range allowedMoves[from] {
		if s == to {
			return true
		}
	}
	return false
}
