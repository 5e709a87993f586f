package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Usage is the resource usage of a finished job's main process and its
// waited-for children.
type Usage struct {
	UserCPU, SysCPU time.Duration
	MaxRSSKB        int64
}

// Transition describes a status move and what changes with it.
type Transition struct {
	To vocab.Status
	At time.Time // zero means d.Now()

	// PID, PGID and PIDStart are recorded with To = vocab.StatusRunning, with
	// the boot they belong to (proc.BootID).
	PID, PGID int
	PIDStart  int64

	// ExitCode, Signal, Usage are recorded with a terminal To.
	ExitCode *int
	Signal   string
	Usage    *Usage

	// Reason is recorded with a terminal To, and in the event either way.
	Reason string

	// Runtime, with a terminal To, is how long the job ran by a monotonic
	// clock (duration_ms); zero records nothing.
	Runtime time.Duration

	// Output, with a terminal To, raises the job's output counters to at
	// least these totals. The appender counts every byte the job wrote;
	// when the database refused its last batches, their counter updates
	// were lost with them, and the end of the job puts them right.
	Output *OutputTotals

	// Detail is extra JSON for the event row. The standard fields (pid,
	// exit_code, signal, reason) are added to it and win over its keys.
	Detail map[string]any
}

// OutputTotals are a job's output counters as its appender knows them.
type OutputTotals struct {
	Bytes, Lines, Dropped int64
}

const (
	jobStatusQuery = `SELECT status FROM jobs WHERE id = ?`
	// Both updates are conditional on the status read in the same
	// transaction: a move is never applied over a status it was not
	// checked against.
	toRunningQuery = `UPDATE jobs SET status = 'running', started_at = ?, pid = ?, pgid = ?, pid_start = ?,
	boot_id = ?
	WHERE id = ? AND status = ?
	RETURNING ` + jobColumns
	toTerminalQuery = `UPDATE jobs SET status = ?, ended_at = ?, last_access_at = ?,
	exit_code = ?, signal = ?, reason = ?, user_cpu_ms = ?, sys_cpu_ms = ?, max_rss_kb = ?,
	duration_ms = coalesce(?, duration_ms), end_ticks = ?,
	output_bytes = max(` + liveOutputBytes + `, coalesce(?, 0)),
	output_lines = max(` + liveOutputLines + `, coalesce(?, 0)),
	last_output_at = nullif(max(coalesce(last_output_at, ''), coalesce(` + liveAtSQL + `, '')), ''),
	dropped_bytes = max(dropped_bytes, coalesce(?, 0))
	WHERE id = ? AND status = ?
	RETURNING ` + jobColumns
	// A queued job's turn: it keeps no more than its row says.
	toStartingQuery = `UPDATE jobs SET status = 'starting', queue_pos = NULL
	WHERE id = ? AND status = ?
	RETURNING ` + jobColumns
	// The start request kept for a queued job goes when it leaves the queue.
	dropQueuedStartQuery       = `DELETE FROM queued_starts WHERE job_id = ?`
	insertTransitionEventQuery = `INSERT INTO events (job_id, scope, at, kind, from_status, to_status, detail)
	SELECT id, scope, ?, 'transition', ?, ?, ? FROM jobs WHERE id = ?`
)

// Transition moves job id to t.To and appends the event row, in one
// transaction; it returns the job as it is afterwards. The allowed moves are
// queued → starting | failed | killed,
// starting → running | failed | killed | lost and running → done | failed |
// killed | timed_out | lost. Anything else, including every move out of a
// terminal status, is vocab.ErrInvalidTransition, wrapped with both statuses. A
// terminal move sets ended_at and restarts the ttl clock (last_access_at).
// A move to running records the current boot (boot_id) and a terminal move
// the process clock (end_ticks): they bound which processes can be the
// job's (proc.Target).
// A missing job is vocab.ErrNotFound.
func (d *DB) Transition(ctx context.Context, id string, t Transition) (Job, error) {
	at := t.At
	if at.IsZero() {
		at = d.Now()
	}
	when := FormatTime(at)
	var job Job
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		var from vocab.Status
		if err := tx.GetContext(ctx, &from, jobStatusQuery, id); errors.Is(err, sql.ErrNoRows) {
			return vocab.ErrNotFound
		} else if err != nil {
			return err
		}
		if !canMove(from, t.To) {
			return fmt.Errorf("from %s to %s: %w", from, t.To, vocab.ErrInvalidTransition)
		}
		var err error
		if from == vocab.StatusQueued {
			if _, err := tx.ExecContext(ctx, dropQueuedStartQuery, id); err != nil {
				return err
			}
		}
		if t.To == vocab.StatusStarting {
			job, err = getJob(ctx, tx, toStartingQuery, id, from)
		} else if t.To == vocab.StatusRunning {
			job, err = getJob(ctx, tx, toRunningQuery, when,
				nullInt(int64(t.PID)), nullInt(int64(t.PGID)), nullInt(t.PIDStart),
				nullString(proc.BootID()), id, from)
		} else {
			var exit sql.NullInt64
			if t.ExitCode != nil {
				exit = sql.NullInt64{Int64: int64(*t.ExitCode), Valid: true}
			}
			var user, sys, rss sql.NullInt64
			if u := t.Usage; u != nil {
				user = sql.NullInt64{Int64: u.UserCPU.Milliseconds(), Valid: true}
				sys = sql.NullInt64{Int64: u.SysCPU.Milliseconds(), Valid: true}
				rss = sql.NullInt64{Int64: u.MaxRSSKB, Valid: u.MaxRSSKB > 0} // 0: not known
			}
			var dur sql.NullInt64
			if t.Runtime > 0 {
				dur = sql.NullInt64{Int64: t.Runtime.Milliseconds(), Valid: true}
			}
			var outBytes, outLines, outDropped sql.NullInt64
			if o := t.Output; o != nil {
				outBytes = sql.NullInt64{Int64: o.Bytes, Valid: true}
				outLines = sql.NullInt64{Int64: o.Lines, Valid: true}
				outDropped = sql.NullInt64{Int64: o.Dropped, Valid: true}
			}
			job, err = getJob(ctx, tx, toTerminalQuery, string(t.To), when, when,
				exit, nullString(t.Signal), nullString(t.Reason), user, sys, rss, dur, nullInt(proc.Now()),
				outBytes, outLines, outDropped, id, from)
		}
		if errors.Is(err, sql.ErrNoRows) {
			// Cannot happen inside an immediate transaction; kept so that a
			// change of locking can never turn into a silent overwrite.
			return fmt.Errorf("from %s to %s: status changed meanwhile: %w", from, t.To, vocab.ErrInvalidTransition)
		}
		if err != nil {
			return err
		}
		detail, err := json.Marshal(transitionDetail(t))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, insertTransitionEventQuery, when, string(from), string(t.To), string(detail), id)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("transition job %s: %w", id, err)
	}
	d.touchStatusMark()
	return job, nil
}

// StatusMarkSuffix names the file beside the database (its path plus this
// suffix) whose modification time moves after every committed status
// change. A process waiting for jobs to end watches it rather than the
// WAL, which every write of output moves: a wait on a quiet job then
// sleeps through another job's flood.
const StatusMarkSuffix = "-status"

// touchStatusMark moves the status mark's time, creating the file (0600)
// when it is missing, never through a symlink (privfile). It is a hint:
// waiters also look on a timer, so a failure (a read-only directory)
// only delays them.
func (d *DB) touchStatusMark() {
	if d.Path == "" || d.Path == ":memory:" {
		return
	}
	_ = privfile.Touch(statusMarkWhat, d.Path+StatusMarkSuffix)
}

// transitionDetail is the event detail of a move: the caller's Detail plus
// the fields the move recorded.
func transitionDetail(t Transition) map[string]any {
	m := make(map[string]any, len(t.Detail)+4)
	maps.Copy(m, t.Detail)
	if t.To == vocab.StatusRunning {
		if t.PID != 0 {
			m["pid"] = t.PID
		}
		if t.PGID != 0 {
			m["pgid"] = t.PGID
		}
	}
	if t.ExitCode != nil && t.To.Terminal() {
		m["exit_code"] = *t.ExitCode
	}
	if t.Signal != "" && t.To.Terminal() {
		m["signal"] = t.Signal
	}
	if t.Reason != "" {
		m["reason"] = t.Reason
	}
	return m
}
