package jobs

import (
	"context"
	"encoding/json"
	"fmt"
)

// NoteOnce records note on the job's audit trail unless the job has it
// already, and reports whether this call recorded it: of several callers,
// in any number of processes, exactly one does. It marks something done
// once per job, such as a completion notice delivered to the scope.
func (c *Client) NoteOnce(ctx context.Context, ref, note string) (bool, error) {
	if err := c.check(ctx); err != nil {
		return false, err
	}
	if err := c.writable(); err != nil {
		return false, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return false, err
	}
	detail, err := json.Marshal(map[string]string{"message": note})
	if err != nil {
		return false, fmt.Errorf("encode note: %w", err)
	}
	ok, err := c.db.AddNoteOnce(ctx, j.ID, detail)
	if err != nil {
		return false, publicErr(ref, err)
	}
	return ok, nil
}
