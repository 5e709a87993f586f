package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/jmoiron/sqlx"
)

// Event is one row of the audit trail. Events have no foreign key to their
// job: they outlive it and are deleted by DeleteEventsBefore.
type Event struct {
	ID    int64 // increasing; the cursor for EventFilter.SinceID
	JobID string
	Scope string
	At    time.Time

	// Kind is "transition" (written only by CreateJob and Transition),
	// "output_dropped" (bytes the database could not take), "hook" (an
	// on-exit command's result) or "note".
	Kind string

	From, To vocab.Status // set for transitions; From is empty for the creation
	Detail   json.RawMessage
}

// EventFilter selects events for Events. Scope applies unless AllScopes.
type EventFilter struct {
	Scope     string
	AllScopes bool
	JobID     string
	SinceID   int64 // only events with a larger id
	Limit     int   // 0 = no limit
}

const eventColumns = `id, job_id, scope, at, kind, from_status, to_status, detail`

// eventRow is an events row as stored.
type eventRow struct {
	ID     int64          `db:"id"`
	JobID  string         `db:"job_id"`
	Scope  string         `db:"scope"`
	At     string         `db:"at"`
	Kind   string         `db:"kind"`
	From   sql.NullString `db:"from_status"`
	To     sql.NullString `db:"to_status"`
	Detail string         `db:"detail"`
}

// event converts a stored row to an Event.
func (r *eventRow) event() (Event, error) {
	at, err := ParseTime(r.At)
	if err != nil {
		return Event{}, fmt.Errorf("read event %d: at: %w", r.ID, err)
	}
	return Event{
		ID:     r.ID,
		JobID:  r.JobID,
		Scope:  r.Scope,
		At:     at,
		Kind:   r.Kind,
		From:   vocab.Status(r.From.String),
		To:     vocab.Status(r.To.String),
		Detail: json.RawMessage(r.Detail),
	}, nil
}

const (
	jobScopeQuery    = `SELECT scope FROM jobs WHERE id = ?`
	insertEventQuery = `INSERT INTO events (job_id, scope, at, kind, detail) VALUES (?, ?, ?, ?, ?)
	RETURNING ` + eventColumns
)

// AddEvent appends a non-transition event (kind output_dropped, hook or
// note) and returns it with its id. A zero At means d.Now(); an empty Scope
// is taken from the job, which must then exist (else vocab.ErrNotFound). vocab.Status
// changes are recorded by Transition only.
func (d *DB) AddEvent(ctx context.Context, e Event) (Event, error) {
	switch e.Kind {
	case "output_dropped", "hook", "note":
	case "transition":
		return Event{}, errors.New("add event: transitions are recorded by Transition")
	default:
		return Event{}, fmt.Errorf("add event: unknown kind %q", e.Kind)
	}
	if e.From != "" || e.To != "" {
		return Event{}, errors.New("add event: from and to belong to transitions")
	}
	detail := string(e.Detail)
	if len(e.Detail) == 0 {
		detail = "{}"
	} else if !json.Valid(e.Detail) {
		return Event{}, errors.New("add event: detail is not valid JSON")
	}
	if e.At.IsZero() {
		e.At = d.Now()
	}
	var r eventRow
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		if e.Scope == "" {
			if err := tx.GetContext(ctx, &e.Scope, jobScopeQuery, e.JobID); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("job %s: %w", e.JobID, vocab.ErrNotFound)
			} else if err != nil {
				return err
			}
		}
		return tx.GetContext(ctx, &r, insertEventQuery, e.JobID, e.Scope, FormatTime(e.At), e.Kind, detail)
	})
	if err != nil {
		return Event{}, fmt.Errorf("add event: %w", err)
	}
	return r.event()
}

const (
	eventsQuery = `SELECT ` + eventColumns + ` FROM events WHERE id > ?`
	// jobEventsQuery reads one job's events through events_job. Left to
	// itself the planner may walk the scope's events (events_scope) and
	// filter them by job, which costs as much as the scope's whole
	// history; INDEXED BY also makes the query fail loudly, instead of
	// growing slow, if the index ever goes.
	jobEventsQuery = `SELECT ` + eventColumns + ` FROM events INDEXED BY events_job WHERE job_id = ? AND id > ?`
)

// eventCursorAtQuery: the event before the oldest (by id) of those stamped
// at or after the time, through events_at; with none that late, the
// newest event (the end of the rowid's b-tree). Left to itself the planner
// finds min(id) by walking the ids from the oldest until one is late
// enough: the whole history before the time.
const eventCursorAtQuery = `SELECT coalesce(
	(SELECT min(id) FROM events INDEXED BY events_at WHERE at >= ?) - 1,
	(SELECT max(id) FROM events), 0)`

// EventCursorAt returns an event id after which every event stamped at or
// after t follows, in any scope: an Events cursor for "from t on". It
// reads the events since t only, not the history before them.
func (d *DB) EventCursorAt(ctx context.Context, t time.Time) (int64, error) {
	var id int64
	if err := d.GetContext(ctx, &id, eventCursorAtQuery, FormatTime(t)); err != nil {
		return 0, fmt.Errorf("find the events since %s: %w", FormatTime(t), err)
	}
	return id, nil
}

// Events lists the events that f selects in ascending id order.
func (d *DB) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	var b strings.Builder
	var args []any
	if f.JobID != "" {
		b.WriteString(jobEventsQuery)
		args = append(args, f.JobID, f.SinceID)
	} else {
		b.WriteString(eventsQuery)
		args = append(args, f.SinceID)
	}
	if !f.AllScopes {
		b.WriteString(` AND scope = ?`)
		args = append(args, f.Scope)
	}
	b.WriteString(` ORDER BY id`)
	if f.Limit > 0 {
		b.WriteString(` LIMIT ?`)
		args = append(args, f.Limit)
	}
	var rows []eventRow
	if err := d.SelectContext(ctx, &rows, b.String(), args...); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	events := make([]Event, 0, len(rows))
	for i := range rows {
		e, err := rows[i].event()
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// eventSlice is how many events one statement of DeleteEventsBefore
// deletes.
const eventSlice = 200

const deleteEventsBeforeQuery = `DELETE FROM events WHERE id IN
	(SELECT id FROM events WHERE at < ? ORDER BY at LIMIT ?)`

// DeleteEventsBefore deletes the events older than t, whether or not their
// job still exists, and reports how many it deleted. It commits every
// BatchBudget or BatchStatements statements, so that other writers never
// wait long behind it.
func (d *DB) DeleteEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	cutoff := FormatTime(t)
	for {
		var n int64
		done := false
		start := time.Now()
		err := d.inTx(ctx, func(tx *sqlx.Tx) error {
			for stmts := 0; time.Since(start) <= BatchBudget && stmts < BatchStatements; stmts++ {
				res, err := tx.ExecContext(ctx, deleteEventsBeforeQuery, cutoff, eventSlice)
				if err != nil {
					return err
				}
				k, err := res.RowsAffected()
				if err != nil {
					return err
				}
				n += k
				if k < eventSlice {
					done = true
					return nil
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("delete events: %w", err)
		}
		total += n
		if done {
			return total, nil
		}
		if err := rest(ctx); err != nil {
			return total, fmt.Errorf("delete events: %w", err)
		}
	}
}

const addNoteOnceQuery = `INSERT INTO events (job_id, scope, at, kind, detail)
	SELECT id, scope, ?, 'note', ? FROM jobs WHERE id = ?
	AND NOT EXISTS (SELECT 1 FROM events WHERE job_id = ? AND kind = 'note' AND detail = ?)`

// AddNoteOnce appends a note with detail to job id's events unless the
// job already has that note, in one statement, and reports whether it
// appended it: of several callers, in any number of processes, exactly
// one does. A job that does not exist gets none.
func (d *DB) AddNoteOnce(ctx context.Context, id string, detail json.RawMessage) (bool, error) {
	if !json.Valid(detail) {
		return false, errors.New("add note: detail is not valid JSON")
	}
	res, err := d.execWrite(ctx, addNoteOnceQuery, FormatTime(d.Now()), string(detail), id, id, string(detail))
	if err != nil {
		return false, fmt.Errorf("add note: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("add note: %w", err)
	}
	return n == 1, nil
}
