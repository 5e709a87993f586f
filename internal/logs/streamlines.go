package logs

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
)

// Lines of one stream. A read of lines with Filter.Stream counts the lines
// of that stream alone: line k of stdout follows the k-th newline written
// to stdout, whatever stderr wrote in between, so "stdout lines 5 to 7"
// are the fifth to seventh lines the job printed on stdout. The counts are
// of the stored output: once the output cap or a clear removed a stream's
// older chunks, its line numbers start after them. (The combined output's
// line numbers are kept with each chunk and do not move; a stream's would
// need a count per stream in every chunk row.)

// streamLineStart returns the offset of the chunk of stream s in which
// line `line` of that stream begins (the newest chunk with fewer of the
// stream's newlines before it), and how many of the stream's newlines
// come before that chunk; 0, 0 when the line begins in the stream's first
// chunk.
func (r *readTx) streamLineStart(ctx context.Context, s Stream, line int64) (off, before int64, err error) {
	const q = `SELECT byte_offset, before FROM (
		SELECT byte_offset, sum(line_count) OVER (ORDER BY byte_offset ROWS UNBOUNDED PRECEDING) - line_count AS before
		FROM chunks WHERE job_id = ?1 AND stream = ?2)
		WHERE before < ?3 ORDER BY byte_offset DESC LIMIT 1`
	err = r.tx.QueryRowContext(ctx, q, r.jobID, string(s), line).Scan(&off, &before)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("find line %d of %s: %w", line, s, err)
	}
	return off, before, nil
}

// streamLines returns the number of newlines stored for stream s.
func (r *readTx) streamLines(ctx context.Context, s Stream) (int64, error) {
	const q = `SELECT coalesce(sum(line_count), 0) FROM chunks WHERE job_id = ? AND stream = ?`
	var n int64
	if err := r.tx.QueryRowContext(ctx, q, r.jobID, string(s)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count lines of %s: %w", s, err)
	}
	return n, nil
}

// readStreamLines is ReadLines with f.Stream set: from and n count the
// lines of that stream. The page's LinesBefore, Lines and TotalLines are
// counts of the stream's lines; Start, End and the byte counts stay
// offsets in the combined output.
func readStreamLines(ctx context.Context, d *db.DB, jobID string, from, n int64, f Filter) (Page, error) {
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return Page{}, err
	}
	defer r.close()
	p := r.page()
	if p.TotalLines, err = r.streamLines(ctx, f.Stream); err != nil {
		return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
	}
	limit := MaxLimit
	if n == 0 {
		limit = DefaultLimit
	}
	var startOff, line int64
	if from > 0 {
		if startOff, line, err = r.streamLineStart(ctx, f.Stream, from); err != nil {
			return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
	}
	var (
		out        []byte
		cur        []byte // the line being read, for Grep
		started    bool
		start, end = r.m.Bytes, r.m.Bytes
		lines      int64
		matches    int64
		truncated  bool
		done       bool
	)
	keep := func(b []byte) bool { // b: whole or partial line; false when the limit is hit
		if f.Grep != nil {
			cur = append(cur, b...)
			if len(cur) == 0 || cur[len(cur)-1] != '\n' {
				return true
			}
			if f.Match(bytes.TrimSuffix(cur, newline)) {
				out = append(out, cur...)
				matches++
			}
			cur = cur[:0]
			return len(out) < limit
		}
		if room := limit - len(out); len(b) > room {
			out = append(out, b[:room]...)
			truncated = true
			return false
		}
		out = append(out, b...)
		return true
	}
	err = r.forward(ctx, startOff, f.Stream, func(c *chunk) bool {
		if c.stream != f.Stream || c.data == nil {
			return true
		}
		data, at := c.data, c.off
		for len(data) > 0 {
			if line < from {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					return true
				}
				data, at, line = data[i+1:], at+int64(i+1), line+1
				continue
			}
			if !started {
				started, start = true, at
			}
			take := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				take = data[:i+1]
			}
			ok := keep(take)
			end = at + int64(len(take))
			if take[len(take)-1] == '\n' {
				line++
				lines++
			}
			if !ok || n > 0 && lines >= n {
				done = true
				return false
			}
			data, at = data[len(take):], at+int64(len(take))
		}
		return true
	})
	if err != nil {
		return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
	}
	if f.Grep != nil && len(cur) > 0 && f.Match(cur) && len(out)+len(cur) <= limit {
		out = append(out, cur...) // the unterminated last line
		matches++
	}
	if !started {
		start = end
	}
	if !done {
		end = r.m.Bytes
	}
	if out == nil {
		out = []byte{}
	}
	p.Data, p.Start, p.End, p.NextOffset = out, start, end, end
	p.LinesBefore, p.Lines, p.Matches = min(from, p.TotalLines), lines, matches
	p.More, p.Truncated = end < p.TotalBytes, truncated
	return p, nil
}

// StreamLinesBefore returns how many lines of stream s end before line
// `line` of the combined output (counted from 0): the stream's own number
// (from 0, as ReadLines with Filter.Stream counts) of its first line that
// ends at or after it. A front end whose line numbers are the combined
// output's reads one stream from there. Like the stream's own counts, it
// counts stored output only.
func StreamLinesBefore(ctx context.Context, d *db.DB, jobID string, s Stream, line int64) (int64, error) {
	return again(ctx, func(ctx context.Context) (int64, error) { return streamLinesBefore(ctx, d, jobID, s, line) })
}

func streamLinesBefore(ctx context.Context, d *db.DB, jobID string, s Stream, line int64) (int64, error) {
	if !s.Valid() {
		return 0, fmt.Errorf("count lines: invalid stream %q", s)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return 0, err
	}
	defer r.close()
	// A chunk holds the combined output's newlines first_line …
	// first_line+line_count-1; those before line end lines before it.
	const q = `SELECT coalesce(sum(max(0, min(line_count, ?3 - first_line))), 0)
		FROM chunks WHERE job_id = ?1 AND stream = ?2 AND first_line < ?3`
	var n int64
	if err := r.tx.QueryRowContext(ctx, q, jobID, string(s), line).Scan(&n); err != nil {
		return 0, fmt.Errorf("count lines of %s: %w", s, err)
	}
	return n, nil
}
