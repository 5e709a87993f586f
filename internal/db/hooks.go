package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

const claimHookCheck = `SELECT count(*) FROM events WHERE job_id = ? AND kind = 'hook'`

// ClaimHook records, once per job, that its on_exit hook is starting: it
// inserts a 'hook' event with {"state":"started"} and returns true, or
// returns false when a hook event for the job exists already. The check and
// the insert share one transaction, so of several supervisors racing to run
// a lost job's hook exactly one wins.
func (d *DB) ClaimHook(ctx context.Context, jobID, scope string) (bool, error) {
	won := false
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, claimHookCheck, jobID); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		var r eventRow
		if err := tx.GetContext(ctx, &r, insertEventQuery, jobID, scope, FormatTime(d.Now()), "hook", `{"state":"started"}`); err != nil {
			return err
		}
		won = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("claim hook of job %s: %w", jobID, err)
	}
	return won, nil
}

// pendingHooksQuery finds lost jobs through the status index; lost jobs
// are few.
const pendingHooksQuery = `SELECT ` + jobColumns + ` FROM jobs j
WHERE j.status = 'lost' AND j.on_exit <> '' AND j.ended_at >= ?
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.id AND e.kind = 'hook')
ORDER BY j.ended_at`

// PendingHooks lists the lost jobs that ended at or after since, have an
// on_exit command and whose hook nobody has claimed (no hook event): jobs
// marked lost by a process that is not a supervisor (a read, `jobs gc`) or
// by a supervisor that was closing. since keeps out the jobs whose hook
// event the janitor may have deleted already (events older than the
// retention): their hooks ran long ago.
func (d *DB) PendingHooks(ctx context.Context, since time.Time) ([]Job, error) {
	jobs, err := queryJobs(ctx, d, pendingHooksQuery, FormatTime(since))
	if err != nil {
		return nil, fmt.Errorf("find pending hooks: %w", err)
	}
	return jobs, nil
}

// pendingEndedHooksQuery finds the jobs through their end's transition
// event (the events_at index): its cost is that of the events since.
const pendingEndedHooksQuery = `SELECT ` + jobColumns + ` FROM jobs j
WHERE j.id IN (SELECT e.job_id FROM events e
    WHERE e.at >= ? AND e.kind = 'transition' AND e.to_status IN ('done', 'failed', 'killed', 'timed_out'))
  AND j.on_exit <> ''
  AND NOT EXISTS (SELECT 1 FROM events h WHERE h.job_id = j.id AND h.kind = 'hook')
ORDER BY j.ended_at`

// PendingEndedHooks lists the jobs that ended done, failed, killed or
// timed out at or after since, have an on_exit command and whose hook
// nobody has claimed: the supervisor that recorded the end died before it
// claimed the hook.
func (d *DB) PendingEndedHooks(ctx context.Context, since time.Time) ([]Job, error) {
	jobs, err := queryJobs(ctx, d, pendingEndedHooksQuery, FormatTime(since))
	if err != nil {
		return nil, fmt.Errorf("find pending hooks: %w", err)
	}
	return jobs, nil
}

const markSurvivorsGoneQuery = `UPDATE jobs SET survivors_gone = 1
WHERE id = ? AND ended_at IS NOT NULL AND survivors_gone = 0`

// MarkSurvivorsGone records that no process of the finished job id is alive.
// It is a one-way fact: a process of a job can only be started by another
// live one, so once none is left none comes back, and readers need not scan
// for them again. A job that has not ended is left unchanged.
func (d *DB) MarkSurvivorsGone(ctx context.Context, id string) error {
	if _, err := d.execWrite(ctx, markSurvivorsGoneQuery, id); err != nil {
		return fmt.Errorf("mark survivors of job %s gone: %w", id, err)
	}
	return nil
}
