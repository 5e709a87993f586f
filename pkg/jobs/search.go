package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/agentjobs/jobs/internal/logs"
)

// searchPage is how much output Search reads at a time: its memory is
// about this much, plus one partial line (at most MaxGrepLine), whatever
// the size of the log.
const searchPage = 4 << 20

// SearchOptions shapes Search.
type SearchOptions struct {
	// Grep is the regular expression each line is tested against.
	Grep string
	// From is the byte offset to start at; a line it falls inside is
	// searched from there.
	From int64
	// Progress, when set, is called after each page read with the offset
	// reached and the offset where the search ends.
	Progress func(at, end int64)
}

// Match is one line that matched.
type Match struct {
	// Line is the line's number in the combined output, from 1 (as
	// Range.FromLine counts).
	Line int64 `json:"line"`
	// Offset is the absolute byte offset of the line's first byte.
	Offset int64 `json:"offset"`
	// Text is the line without its newline; of a line longer than
	// MaxGrepLine, its first MaxGrepLine bytes (Cut is set).
	Text string `json:"text"`
	Cut  bool   `json:"cut,omitempty"`
}

// Gap is a range of a job's output a search did not see: evicted by the
// output cap or a clear, or dropped on a full disk.
type Gap struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// SearchResult says what Search examined and found.
type SearchResult struct {
	JobID string `json:"id"`
	Grep  string `json:"grep"`
	// Count is the number of matching lines.
	Count int64 `json:"count"`
	// Start and End are the range searched, [Start, End): from
	// SearchOptions.From to the end of the output when the search began
	// (a running job's later output is not searched).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Searched counts the bytes examined: the range less its gaps.
	Searched int64 `json:"searched_bytes"`
	// Gaps are the parts of the range that are not stored; EvictedTotal
	// and DroppedTotal say which cause they can be (see Output).
	Gaps         []Gap `json:"not_searched"`
	EvictedTotal int64 `json:"evicted_total"`
	DroppedTotal int64 `json:"dropped_total"`
	// TotalBytes and TotalLines are the job's whole output so far.
	TotalBytes int64 `json:"total_bytes"`
	TotalLines int64 `json:"total_lines"`
	// CutLines counts the lines longer than MaxGrepLine: a matching one
	// is shown in part; one that ran across pages or a gap was tested on
	// its first MaxGrepLine bytes.
	CutLines int64 `json:"cut_lines"`
}

// Search tests every stored line of the job's output from o.From to the
// end against o.Grep and calls each with every matching line, in order.
// It reads the log a page at a time, so its memory stays bounded however
// large the log is, and reports what it could not search (the gaps of
// evicted or dropped output). An error from each ends the search and is
// returned.
func (c *Client) Search(ctx context.Context, ref string, o SearchOptions, each func(Match) error) (res SearchResult, err error) {
	if err := c.check(ctx); err != nil {
		return SearchResult{}, err
	}
	if o.From < 0 {
		return SearchResult{}, fmt.Errorf("%w: offsets cannot be negative", ErrInvalid)
	}
	line, err := regexp.Compile(o.Grep)
	if err != nil {
		return SearchResult{}, fmt.Errorf("%w: invalid regular expression: %v", ErrInvalid, err)
	}
	// A match anywhere in a page points at a line to test: (?m) so that ^
	// and $ match at the page's line bounds as they do at a line's.
	page, err := regexp.Compile("(?m)" + o.Grep)
	if err != nil {
		return SearchResult{}, fmt.Errorf("%w: invalid regular expression: %v", ErrInvalid, err)
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return SearchResult{}, err
	}
	first, err := logs.ReadRange(ctx, c.db, j.ID, o.From, 1, logs.Filter{})
	if err != nil {
		return SearchResult{}, err
	}
	// An access once the search ends, unless a read met a damaged page:
	// such a read writes nothing.
	defer func() {
		if !errors.As(err, new(*CorruptError)) {
			c.touch(ctx, j)
		}
	}()
	s := &searcher{
		line: line, page: page, each: each,
		res: SearchResult{JobID: j.ID, Grep: o.Grep, Start: first.Start, End: first.TotalBytes,
			TotalBytes: first.TotalBytes, TotalLines: first.TotalLines,
			EvictedTotal: first.EvictedBytes, DroppedTotal: first.DroppedBytes},
		pos: first.Start, lineNo: first.LinesBefore, carryAt: first.Start,
	}
	for s.pos < s.res.End {
		before := s.pos
		segs, p, err := logs.ReadSegments(ctx, c.db, j.ID, s.pos, min(searchPage, s.res.End-s.pos))
		if err != nil {
			return s.res, err
		}
		for _, seg := range segs {
			if seg.Offset > s.pos {
				if err := s.gap(ctx, c, j.ID, seg.Offset); err != nil {
					return s.res, err
				}
			}
			if err := s.feed(seg.Data); err != nil {
				return s.res, err
			}
		}
		if end := min(p.End, s.res.End); end > s.pos {
			// The rest of the page is not stored.
			if err := s.gap(ctx, c, j.ID, end); err != nil {
				return s.res, err
			}
		}
		if s.pos <= before {
			break // nothing more to read (not expected: the range was there)
		}
		if o.Progress != nil {
			o.Progress(s.pos, s.res.End)
		}
		if err := ctx.Err(); err != nil {
			return s.res, err
		}
	}
	if err := s.flush(); err != nil {
		return s.res, err
	}
	return s.res, nil
}

// searcher is the state of one Search between pages.
type searcher struct {
	line, page *regexp.Regexp
	each       func(Match) error
	res        SearchResult
	// pos is the next offset to read; lineNo the number of newlines
	// before it (from 0).
	pos, lineNo int64
	// carry is the partial line read before pos, which begins at carryAt
	// (at most MaxGrepLine bytes of it; carryCut when it was longer).
	carry    []byte
	carryAt  int64
	carryCut bool
}

// gap skips the unstored bytes [s.pos, to): the partial line before it
// ends there, and line numbers go on from the store's count at to.
func (s *searcher) gap(ctx context.Context, c *Client, id string, to int64) error {
	if err := s.flush(); err != nil {
		return err
	}
	if k := len(s.res.Gaps) - 1; k >= 0 && s.res.Gaps[k].End == s.pos {
		s.res.Gaps[k].End = to
	} else {
		s.res.Gaps = append(s.res.Gaps, Gap{Start: s.pos, End: to})
	}
	s.pos, s.carryAt = to, to
	if to >= s.res.End {
		return nil
	}
	p, err := logs.ReadRange(ctx, c.db, id, to, 1, logs.Filter{})
	if err != nil {
		return err
	}
	s.lineNo = p.LinesBefore
	return nil
}

// feed takes the next stored bytes, which follow s.pos.
func (s *searcher) feed(data []byte) error {
	s.res.Searched += int64(len(data))
	base := s.pos
	s.pos += int64(len(data))
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		s.keep(data)
		return nil
	}
	// The line carried from before ends here.
	if len(s.carry) > 0 || s.carryCut {
		s.keep(data[:nl])
		if err := s.test(s.carry, s.carryAt, s.carryCut); err != nil {
			return err
		}
	} else if err := s.test(data[:nl], base, false); err != nil {
		return err
	}
	s.lineNo++
	last := bytes.LastIndexByte(data, '\n')
	if err := s.scan(data[nl+1:last+1], base+int64(nl+1)); err != nil {
		return err
	}
	s.carry, s.carryCut, s.carryAt = s.carry[:0], false, base+int64(last+1)
	s.keep(data[last+1:])
	return nil
}

// keep adds b to the partial line, up to MaxGrepLine bytes.
func (s *searcher) keep(b []byte) {
	room := MaxGrepLine - len(s.carry)
	if len(b) > room {
		b, s.carryCut = b[:max(room, 0)], true
	}
	s.carry = append(s.carry, b...)
}

// flush tests the partial line, which ends at a gap or the end.
func (s *searcher) flush() error {
	if len(s.carry) == 0 && !s.carryCut {
		return nil
	}
	err := s.test(s.carry, s.carryAt, s.carryCut)
	s.carry, s.carryCut = s.carry[:0], false
	return err
}

// scan tests the whole lines of buf (each ends with a newline), which
// starts at offset at and at line s.lineNo. The page expression finds the
// next place worth a look, so lines without a match cost no call each;
// the line it lies in is then tested alone, as a line must match.
func (s *searcher) scan(buf []byte, at int64) error {
	from, counted := 0, 0
	startLine := s.lineNo
	for from < len(buf) {
		loc := s.page.FindIndex(buf[from:])
		if loc == nil {
			break
		}
		p := from + loc[0]
		ls := bytes.LastIndexByte(buf[:p], '\n') + 1
		if ls < from {
			ls = from
		}
		le := ls + bytes.IndexByte(buf[ls:], '\n')
		s.lineNo += int64(bytes.Count(buf[counted:ls], []byte{'\n'}))
		counted = ls
		// The line is within the page: it is tested whole, and only what
		// is shown of it is cut.
		if s.line.Match(buf[ls:le]) {
			text, cut := buf[ls:le], le-ls > MaxGrepLine
			if cut {
				text = text[:MaxGrepLine]
				s.res.CutLines++
			}
			if err := s.emit(text, at+int64(ls), cut); err != nil {
				return err
			}
		}
		from = le + 1
	}
	s.lineNo = startLine + int64(bytes.Count(buf, []byte{'\n'}))
	return nil
}

// test tests one line that starts at offset at.
func (s *searcher) test(text []byte, at int64, cut bool) error {
	if cut {
		s.res.CutLines++
	}
	if !s.line.Match(text) {
		return nil
	}
	return s.emit(text, at, cut)
}

func (s *searcher) emit(text []byte, at int64, cut bool) error {
	s.res.Count++
	if s.each == nil {
		return nil
	}
	return s.each(Match{Line: s.lineNo + FirstLine, Offset: at, Text: string(text), Cut: cut})
}
