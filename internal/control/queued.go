package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

// KillQueued ends a queued job before its turn: status killed, reason
// "killed while queued". done is false when the job is not queued (any
// more): the caller then kills it as a job with a process.
func KillQueued(ctx context.Context, d *db.DB, j db.Job) (res vocab.KillResult, done bool, err error) {
	if j.Status != vocab.StatusQueued {
		return res, false, nil
	}
	killed, err := d.Transition(ctx, j.ID, db.Transition{To: vocab.StatusKilled, Reason: "killed while queued"})
	if errors.Is(err, vocab.ErrInvalidTransition) {
		return res, false, nil // its turn came meanwhile
	}
	if err != nil {
		return res, true, fmt.Errorf("kill job %s: %w", j.ID, err)
	}
	return vocab.KillResult{JobID: killed.ID, Status: killed.Status, Signalled: []int{}, Survivors: []int{}}, true, nil
}
