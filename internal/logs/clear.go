package logs

import (
	"context"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
)

// Clear deletes every stored chunk of jobID; everything stored so far counts
// as evicted. Offsets and line numbers are unchanged, and an appender that
// tracks the job goes on writing after them. It returns an error wrapping
// ErrJobNotFound when the job does not exist.
func Clear(ctx context.Context, d *db.DB, jobID string) error {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("clear output: %w", err)
	}
	defer tx.Rollback()
	// The row is brought up to the newest chunk first (it may lag while
	// the job runs; see DefaultRowEvery): everything up to there is evicted.
	ok, err := db.EvictAllOutput(ctx, tx, jobID)
	if err != nil {
		return fmt.Errorf("clear output of job %s: %w", jobID, err)
	}
	if !ok {
		return fmt.Errorf("clear output of job %s: %w", jobID, ErrJobNotFound)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE job_id = ?`, jobID); err != nil {
		return fmt.Errorf("clear output of job %s: %w", jobID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("clear output of job %s: %w", jobID, err)
	}
	return nil
}
