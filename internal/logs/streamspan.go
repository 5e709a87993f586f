package logs

import (
	"context"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
)

const streamSpanQuery = `SELECT
	EXISTS (SELECT 1 FROM chunks WHERE job_id = ?1 AND stream = ?2 AND byte_offset < ?3),
	EXISTS (SELECT 1 FROM chunks WHERE job_id = ?1 AND stream = ?2 AND byte_offset + ` + db.ChunkSize + ` > ?4)`

// StreamOutside reports whether the job has stored output of stream
// before start and after end. A page read with a Stream filter counts
// what lies outside its range in bytes of every stream (its range is the
// one examined); with nothing of its own stream there, a reader must not
// be told that more of it is earlier or later.
func StreamOutside(ctx context.Context, d *db.DB, jobID string, stream Stream, start, end int64) (before, after bool, err error) {
	if err := d.QueryRowContext(ctx, streamSpanQuery, jobID, string(stream), start, end).Scan(&before, &after); err != nil {
		return false, false, fmt.Errorf("read output of job %s: %w", jobID, err)
	}
	return before, after, nil
}
