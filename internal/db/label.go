package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/agentjobs/jobs/internal/vocab"
)

const (
	jobLabelQuery  = `SELECT scope, label FROM jobs WHERE id = ?`
	setLabelQuery  = `UPDATE jobs SET label = ? WHERE id = ?`
	labelNoteQuery = `INSERT INTO events (job_id, scope, at, kind, detail) VALUES (?, ?, ?, 'note', ?)`
)

// SetLabel changes job id's label and appends a note saying from what to
// what (the audit trail keeps who was in which group), in one
// transaction. The label is free text to the engine; a front end may give
// it a meaning, such as the session a job belongs to. Errors:
// vocab.ErrNotFound.
func (d *DB) SetLabel(ctx context.Context, id, label string) error {
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		var cur struct {
			Scope string `db:"scope"`
			Label string `db:"label"`
		}
		if err := tx.GetContext(ctx, &cur, jobLabelQuery, id); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %s: %w", id, vocab.ErrNotFound)
		} else if err != nil {
			return err
		}
		if cur.Label == label {
			return nil
		}
		if _, err := tx.ExecContext(ctx, setLabelQuery, label, id); err != nil {
			return err
		}
		detail, err := json.Marshal(map[string]string{"message": "label changed", "from": cur.Label, "to": label})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, labelNoteQuery, id, cur.Scope, FormatTime(d.Now()), string(detail))
		return err
	})
	if err != nil {
		return fmt.Errorf("set label of job %s: %w", id, err)
	}
	return nil
}
