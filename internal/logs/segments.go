package logs

import (
	"context"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
)

// Segment is a run of bytes of one stream at an absolute offset of the
// job's combined output.
type Segment struct {
	Stream Stream
	Offset int64
	Data   []byte
}

// End is the offset after the segment's last byte.
func (s Segment) End() int64 { return s.Offset + int64(len(s.Data)) }

// ReadSegments reads the stored output in [offset, offset+limit) (limit
// DefaultLimit when 0, at most MaxLimit) as the runs of one stream each
// that it consists of, in order. A read filtered by stream cannot say
// where each of its bytes lay; a caller that keeps the streams apart and
// must cut them all at one offset (whole lines of each stream) reads them
// here. Evicted bytes are in no segment (the page's Gap counts them). The
// page's Start and End are the range read, clipped to the output; its Data
// is empty.
func ReadSegments(ctx context.Context, d *db.DB, jobID string, offset, limit int64) ([]Segment, Page, error) {
	type result struct {
		segs []Segment
		p    Page
	}
	r, err := again(ctx, func(ctx context.Context) (result, error) {
		segs, p, err := readSegments(ctx, d, jobID, offset, limit)
		return result{segs, p}, err
	})
	return r.segs, r.p, err
}

func readSegments(ctx context.Context, d *db.DB, jobID string, offset, limit int64) ([]Segment, Page, error) {
	if offset < 0 || limit < 0 {
		return nil, Page{}, fmt.Errorf("read output: negative offset %d or limit %d", offset, limit)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return nil, Page{}, err
	}
	defer r.close()
	p := r.page()
	n, clamped := clampLimit(limit)
	start := min(offset, r.m.Bytes)
	end := min(start+int64(n), r.m.Bytes)
	var segs []Segment
	stored := int64(0)
	if start < end {
		err = r.forward(ctx, start, "", func(c *chunk) bool {
			if c.off >= end {
				return false
			}
			lo, hi := max(start, c.from), min(end, c.end())
			if hi <= lo || c.data == nil {
				return true
			}
			data := c.data[lo-c.from : hi-c.from]
			stored += int64(len(data))
			if k := len(segs) - 1; k >= 0 && segs[k].Stream == c.stream && segs[k].End() == lo {
				segs[k].Data = append(segs[k].Data, data...)
			} else {
				segs = append(segs, Segment{Stream: c.stream, Offset: lo, Data: append([]byte(nil), data...)})
			}
			return true
		})
		if err != nil {
			return nil, Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
	}
	p.Data = []byte{}
	p.Start, p.End, p.NextOffset = start, end, end
	p.Gap = (end - start) - stored
	p.More = end < p.TotalBytes
	p.Truncated = clamped && p.More
	return segs, p, nil
}
