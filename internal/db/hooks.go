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

// pendingHooksQuery lists the unclaimed hooks of jobs ended since ?; the
// lost-only form adds its condition in front, where the status index
// serves it.
const (
	pendingHooksTail = `j.on_exit <> '' AND j.ended_at >= ?
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.id AND e.kind = 'hook')
ORDER BY j.ended_at`
	pendingHooksQuery     = `SELECT ` + jobColumns + ` FROM jobs j WHERE ` + pendingHooksTail
	pendingLostHooksQuery = `SELECT ` + jobColumns + ` FROM jobs j WHERE j.status = 'lost' AND ` + pendingHooksTail
)

// PendingHooks lists the jobs that ended at or after since, have an
// on_exit command and whose hook nobody has claimed (no hook event): with
// lostOnly, only lost ones. A lost job is listed when a process that is
// not a supervisor marked it (a read, `jobs gc`), or a supervisor that was
// closing; a job that ended any other way only when whoever recorded its
// end died before it claimed the hook. since keeps out the jobs whose hook
// event the janitor may have deleted already (events older than the
// retention), whose hooks ran long ago.
func (d *DB) PendingHooks(ctx context.Context, since time.Time, lostOnly bool) ([]Job, error) {
	q := pendingHooksQuery
	if lostOnly {
		q = pendingLostHooksQuery
	}
	jobs, err := queryJobs(ctx, d, q, FormatTime(since))
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
	if _, err := d.ExecContext(ctx, markSurvivorsGoneQuery, id); err != nil {
		return fmt.Errorf("mark survivors of job %s gone: %w", id, err)
	}
	return nil
}
