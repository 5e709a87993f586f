package jobs

import (
	"context"

	"github.com/agentjobs/jobs/internal/logs"
)

// StreamLineAt translates a line number of the combined output (from
// FirstLine) into one stream's own numbering, as Range.FromLine counts
// with Range.Stream set: the first line of stream that ends at or after
// combined line `line`. A front end that numbers every line by the
// combined output (LineMark.Line) reads one stream from a number it gave
// out with it.
func (c *Client) StreamLineAt(ctx context.Context, ref string, stream Stream, line int64) (int64, error) {
	if err := c.check(ctx); err != nil {
		return 0, err
	}
	f, err := filter(stream, "", false)
	if err != nil {
		return 0, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return 0, err
	}
	n, err := logs.StreamLinesBefore(ctx, c.db, j.ID, f.Stream, max(line, FirstLine)-FirstLine)
	if err != nil {
		return 0, publicErr(ref, err)
	}
	return n + FirstLine, nil
}
