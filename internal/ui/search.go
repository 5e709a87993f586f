package ui

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// searchPage is how much output a search reads at a time: memory stays
// this, plus one line, plus the matches kept, whatever the log's size.
const searchPage = 4 << 20

// maxSearchLine bounds the one line a search carries from one read to the
// next; of a longer line (a progress bar without a newline) the first
// maxSearchLine bytes are tested.
const maxSearchLine = jobs.MaxGrepLine

// searchShown caps the matches one results page lists; the count covers
// them all.
const searchShown = 1000

// hit is one matching line.
type hit struct {
	Line   int64 // from jobs.FirstLine
	Offset int64 // of the line's first byte
	Text   string
}

// searchResult is a search of a job's whole retained output.
type searchResult struct {
	Count    int64 // matching lines
	Hits     []hit // the first searchShown matches after the line asked for
	After    int64 // Hits are of lines after this one
	More     bool  // matches after Hits
	Searched int64 // bytes read
	Gaps     int64 // bytes in the output's range that are not stored (the output cap)
	Cut      int64 // lines longer than maxSearchLine, tested in part
}

// searcher tests the lines of a job's output, in order, one read of
// searchPage at a time. A line is tested as the page shows it (escape
// sequences stripped, carriage-return redraws collapsed), since a person
// searches for what they read.
type searcher struct {
	line  *regexp.Regexp // the pattern, tested on one line
	multi *regexp.Regexp // the pattern with ^ and $ at line ends, to find candidates in a run of lines
	res   searchResult
	keep  int

	carry      []byte // the start of a line the last read cut
	carryAt    int64  // its offset
	carryLine  int64  // its number
	carryCut   bool   // longer than maxSearchLine
	carryValid bool
}

func newSearcher(pattern string, after int64, keep int) (*searcher, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: bad regular expression %q: %v", jobs.ErrInvalid, clip(pattern), err)
	}
	// (?m) only moves ^ and $ to line ends: a match of the pattern in one
	// line is a match in the run of lines too, so no line is missed, and
	// each candidate is confirmed on its line alone.
	multi, err := regexp.Compile("(?m:" + pattern + ")")
	if err != nil {
		return nil, fmt.Errorf("%w: bad regular expression %q: %v", jobs.ErrInvalid, clip(pattern), err)
	}
	return &searcher{line: re, multi: multi, keep: keep, res: searchResult{After: after}}, nil
}

// search reads job id's whole retained output and returns the matches of
// pattern: all counted, the first keep after line after listed.
func search(ctx context.Context, c *jobs.Client, id, pattern string, after int64, keep int) (searchResult, error) {
	s, err := newSearcher(pattern, after, keep)
	if err != nil {
		return searchResult{}, err
	}
	off := int64(0)
	for {
		out, err := c.Log(ctx, id, jobs.Range{ByteRange: true, Offset: off, Limit: searchPage})
		if err != nil {
			return searchResult{}, err
		}
		if out.End <= off {
			break
		}
		if out.Evicted > 0 {
			// Bytes the output cap removed lie in this range: read the
			// stored runs apart, so no line is joined across the gap
			// and line numbers start again where the store says.
			if err := s.gapped(ctx, c, id, off, out.End); err != nil {
				return searchResult{}, err
			}
		} else {
			s.feed(out.Text, out.Start, out.FirstLine)
		}
		off = out.End
		if out.End >= out.TotalBytes {
			break
		}
	}
	s.endLine()
	return s.res, nil
}

// gapped searches [from, to), which holds bytes that are not stored, one
// stored run at a time.
func (s *searcher) gapped(ctx context.Context, c *jobs.Client, id string, from, to int64) error {
	segs, out, err := c.Segments(ctx, id, from, to-from)
	if err != nil {
		return err
	}
	s.res.Gaps += out.Evicted
	at := from
	for _, g := range segs {
		if g.Offset != at {
			s.endLine() // a line cut by the gap ends there
		}
		first := int64(0)
		if !s.carryValid {
			// The store knows the number of the line at g.Offset.
			p, err := c.Log(ctx, id, jobs.Range{ByteRange: true, Offset: g.Offset, Limit: 1})
			if err != nil {
				return err
			}
			first = p.FirstLine
		}
		s.feed(g.Text, g.Offset, first)
		at = g.Offset + int64(len(g.Text))
	}
	return nil
}

// feed searches text, the output from offset at; firstLine is the number
// of the line that holds its first byte (used when no line is carried).
func (s *searcher) feed(text string, at, firstLine int64) {
	s.res.Searched += int64(len(text))
	if s.carryValid {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			s.grow(text)
			return
		}
		s.grow(text[:i])
		firstLine = s.carryLine + 1
		s.endLine()
		text, at = text[i+1:], at+int64(i)+1
	}
	last := strings.LastIndexByte(text, '\n')
	if last >= 0 {
		s.lines(text[:last+1], at, firstLine)
		firstLine += int64(strings.Count(text[:last+1], "\n"))
	}
	if rest := text[last+1:]; rest != "" {
		s.carry, s.carryValid, s.carryCut = s.carry[:0], true, false
		s.carryAt, s.carryLine = at+int64(last+1), firstLine
		s.grow(rest)
	}
}

// grow adds to the carried line, up to maxSearchLine bytes.
func (s *searcher) grow(b string) {
	room := maxSearchLine - len(s.carry)
	if len(b) > room {
		b, s.carryCut = b[:max(room, 0)], true
	}
	s.carry = append(s.carry, b...)
}

// endLine tests the carried line, if any, as a whole line.
func (s *searcher) endLine() {
	if !s.carryValid {
		return
	}
	if s.carryCut {
		s.res.Cut++
	}
	s.test(string(s.carry), s.carryAt, s.carryLine)
	s.carry, s.carryValid = s.carry[:0], false
}

// lines searches whole lines: text begins a line and ends with a newline;
// its first line is number first. A run of lines without escape
// sequences or carriage returns is searched at once for candidates; a
// line with them is cleaned and tested alone.
func (s *searcher) lines(text string, at, first int64) {
	// counted is where the line numbers have been counted to.
	counted, line := 0, first
	lineOf := func(pos int) int64 {
		line += int64(strings.Count(text[counted:pos], "\n"))
		counted = pos
		return line
	}
	pos := 0
	for pos < len(text) {
		dirty := strings.IndexAny(text[pos:], "\x1b\r")
		end := len(text)
		if dirty >= 0 {
			dirty += pos
			end = strings.LastIndexByte(text[:dirty], '\n') + 1
		}
		if end > pos {
			s.plain(text[pos:end], at+int64(pos), pos, lineOf)
		}
		if dirty < 0 {
			return
		}
		e := end + strings.IndexByte(text[end:], '\n')
		raw := text[end:e]
		s.test(string(textclean.CleanLine([]byte(raw))), at+int64(end), lineOf(end))
		pos = e + 1
	}
}

// plain searches run, whole lines without escape sequences, which begins at
// index base of the text lineOf counts in.
func (s *searcher) plain(run string, at int64, base int, lineOf func(int) int64) {
	p := 0
	for p < len(run) {
		loc := s.multi.FindStringIndex(run[p:])
		if loc == nil {
			return
		}
		m := p + loc[0]
		if m >= len(run) {
			return // an empty match after the last newline
		}
		ls := strings.LastIndexByte(run[:m], '\n') + 1
		le := ls + strings.IndexByte(run[ls:], '\n')
		if s.line.MatchString(run[ls:le]) {
			s.hit(run[ls:le], at+int64(ls), lineOf(base+ls))
		}
		p = le + 1
	}
}

// test tests one line as it is shown.
func (s *searcher) test(shown string, at, line int64) {
	if s.line.MatchString(shown) {
		s.hit(shown, at, line)
	}
}

// hit counts a match and keeps it when it is one of those listed.
func (s *searcher) hit(text string, at, line int64) {
	s.res.Count++
	if line <= s.res.After {
		return
	}
	if len(s.res.Hits) >= s.keep {
		s.res.More = true
		return
	}
	if len(text) > 2048 {
		text = strings.ToValidUTF8(text[:2048], "")
	}
	s.res.Hits = append(s.res.Hits, hit{Line: line, Offset: at, Text: visible(shorten(text, 500))})
}
