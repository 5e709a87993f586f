package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Stop intent and tmux settings live in columns of their own (migration
// 00002) and are read with their own small queries rather than through Job:
// only the processes that end a job, and the tmux capture helper, need them.

const (
	// Only an active job takes a stop request, and the first request
	// wins: a timeout that fires while a kill is in progress must not
	// turn "killed" into "timed_out".
	requestStopQuery = `UPDATE jobs SET stop_requested = ?
	WHERE id = ? AND stop_requested IS NULL AND status IN ('starting', 'running')`
	stopRequestedQuery = `SELECT stop_requested FROM jobs WHERE id = ?`
	setKeepTmuxQuery   = `UPDATE jobs SET keep_tmux = ? WHERE id = ?`
	keepTmuxQuery      = `SELECT keep_tmux FROM jobs WHERE id = ?`
)

// RequestStop records that job id is being ended on purpose, with status
// vocab.StatusKilled or vocab.StatusTimedOut, before the killer signals it. Whoever
// records the job's exit — possibly another process — then records that
// status instead of failed. The first request wins; a request for a job
// that has finished, or already has one, changes nothing and is not an
// error. Errors: vocab.ErrNotFound, or a status other than killed or timed_out.
func (d *DB) RequestStop(ctx context.Context, id string, status vocab.Status) error {
	if status != vocab.StatusKilled && status != vocab.StatusTimedOut {
		return fmt.Errorf("request stop of job %s: status %q is not killed or timed_out", id, status)
	}
	res, err := d.execWrite(ctx, requestStopQuery, string(status), id)
	if err != nil {
		return fmt.Errorf("request stop of job %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("request stop of job %s: %w", id, err)
	} else if n == 0 {
		if _, err := d.StopRequested(ctx, id); err != nil {
			return fmt.Errorf("request stop of job %s: %w", id, errors.Unwrap(err))
		}
	}
	return nil
}

// StopRequested returns the status a stop request asked for (vocab.StatusKilled
// or vocab.StatusTimedOut), or "" when nobody asked job id to stop. Errors:
// vocab.ErrNotFound.
func (d *DB) StopRequested(ctx context.Context, id string) (vocab.Status, error) {
	var s sql.NullString
	if err := d.GetContext(ctx, &s, stopRequestedQuery, id); errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read stop request of job %s: %w", id, vocab.ErrNotFound)
	} else if err != nil {
		return "", fmt.Errorf("read stop request of job %s: %w", id, err)
	}
	return vocab.Status(s.String), nil
}

// SetKeepTmux records whether a tmux job's session stays open after the
// job ends. Errors: vocab.ErrNotFound.
func (d *DB) SetKeepTmux(ctx context.Context, id string, keep bool) error {
	res, err := d.execWrite(ctx, setKeepTmuxQuery, keep, id)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = vocab.ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("set keep_tmux of job %s: %w", id, err)
	}
	return nil
}

// KeepTmux reports whether a tmux job's session stays open after the job
// ends. Errors: vocab.ErrNotFound.
func (d *DB) KeepTmux(ctx context.Context, id string) (bool, error) {
	var keep bool
	if err := d.GetContext(ctx, &keep, keepTmuxQuery, id); errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("read keep_tmux of job %s: %w", id, vocab.ErrNotFound)
	} else if err != nil {
		return false, fmt.Errorf("read keep_tmux of job %s: %w", id, err)
	}
	return keep, nil
}
