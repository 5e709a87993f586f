package logs

import (
	"context"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// LineMark is what the store knows of one line beyond its text: the
// stream whose write ended it (its newline; for the unfinished last line,
// its last bytes) and the time of the stored chunk that holds that end.
// A chunk's time is that of its latest write, and a chunk holds up to
// GrowChunk bytes of one stream written close together, so At is the
// line's own write time or later by the time until the chunk's last
// write.
type LineMark struct {
	Stream Stream
	At     time.Time
	// Line is the line's number in the combined output of every stream
	// (counted from 0): the newlines written before its end, by any
	// stream. A line of one stream read alone keeps the number it has
	// among all of them. An unfinished last line shares the number of the
	// combined line its bytes begin, which another stream may end.
	Line int64
}

// LineMarks returns the marks of n lines from line from (counted from 0,
// as ReadLines counts them: over all streams, or within f.Stream alone).
// Lines that are no longer stored (evicted) get none: the result may be
// shorter than n, and is empty past the end.
func LineMarks(ctx context.Context, d *db.DB, jobID string, from, n int64, only Stream) ([]LineMark, error) {
	return again(ctx, func(ctx context.Context) ([]LineMark, error) { return lineMarks(ctx, d, jobID, from, n, only) })
}

func lineMarks(ctx context.Context, d *db.DB, jobID string, from, n int64, only Stream) ([]LineMark, error) {
	if from < 0 || n <= 0 {
		return nil, nil
	}
	if only != "" && !only.Valid() {
		return nil, fmt.Errorf("read line marks: invalid stream %q", only)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// Over all streams the chunks carry the global line number; a stream's
	// own lines are counted from its first stored chunk, as
	// readStreamLines counts them.
	q := `SELECT stream, first_line, line_count, at FROM chunks
		WHERE job_id = ?1 AND first_line + line_count >= ?2
		ORDER BY byte_offset`
	args := []any{jobID, from}
	if only != "" {
		q = `SELECT stream, first_line, line_count, at FROM chunks
			WHERE job_id = ?1 AND stream = ?2
			ORDER BY byte_offset`
		args = []any{jobID, string(only)}
	}
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read line marks: %w", err)
	}
	defer rows.Close()
	var (
		marks []LineMark
		line  int64 // the stream's lines counted so far, when only is set
		last  LineMark
		seen  bool
		gap   bool
	)
	for rows.Next() && int64(len(marks)) < n {
		var (
			stream       string
			first, count int64
			at           string
		)
		if err := rows.Scan(&stream, &first, &count, &at); err != nil {
			return nil, fmt.Errorf("read line marks: %w", err)
		}
		t, err := db.ParseTime(at)
		if err != nil {
			return nil, fmt.Errorf("read line marks: %w", err)
		}
		global := first // the combined line number of the chunk's first newline
		if only != "" {
			first, line = line, line+count
		}
		last, seen = LineMark{Stream: Stream(stream), At: t, Line: global + count}, true
		// The newlines first … first+count-1 end lines of those numbers.
		for k := max(first, from+int64(len(marks))); k < first+count && int64(len(marks)) < n; k++ {
			if k != from+int64(len(marks)) {
				gap = true // evicted chunks: the marks stop there
				break
			}
			m := last
			m.Line = global + k - first
			marks = append(marks, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read line marks: %w", err)
	}
	// The unfinished last line ends in the last chunk.
	if seen && !gap && int64(len(marks)) < n {
		marks = append(marks, last)
	}
	return marks, nil
}
