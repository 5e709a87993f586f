package jobs

import (
	"context"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// syncer is a controller that can store a job's pending output at once
// (Supervisor.Sync, in process or over the socket).
type syncer interface {
	Sync(ctx context.Context, jobID string) error
}

// syncTimeout bounds one Sync: a frozen supervisor must not hold a wait.
const syncTimeout = 5 * time.Second

// syncOutput asks the live supervisor of j to store every byte j has
// written so far, and reports whether it did. A wait that ends because a
// job blocked on its stdin calls it before answering, so that the prompt
// the job wrote just before blocking is in the database when the caller
// reads it: it sits in a pipe or in the supervisor's batch until the next
// flush otherwise, and on a loaded machine that flush can come much later
// than the block. It starts nothing: with no live supervisor, or one too
// old to know the request, it reports false and the caller falls back to
// waiting a few flushes.
func (c *Client) syncOutput(ctx context.Context, j db.Job) bool {
	ctl, done, err := c.controllerFor(ctx, j)
	if err != nil || ctl == nil {
		return false
	}
	defer done()
	s, ok := ctl.(syncer)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	return s.Sync(ctx, j.ID) == nil
}
