package ui

import (
	"context"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unsafe"

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

	// lits, when set, are strings one of which every match holds (in
	// lower case when fold): lines are found by looking for them, which
	// is many times faster than running the pattern over every byte
	// (Go's regexp has no fast path for a pattern that does not begin
	// with a literal, such as (?i)error or ^(a|b)$).
	lits  []string
	fold  bool
	lower []byte // the run in lower case, when fold

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
	s := &searcher{line: re, multi: multi, keep: keep, res: searchResult{After: after}}
	if t, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		s.lits, s.fold, _ = required(t.Simplify())
		if s.fold {
			// Strings of a case-sensitive part are looked for in lower
			// case too: the lines found are then tested by the pattern.
			for i, l := range s.lits {
				s.lits[i] = asciiLower(l)
			}
		}
	}
	return s, nil
}

// maxLits bounds the strings a search looks for at once.
const maxLits = 8

// required returns strings one of which every match of t contains, and
// whether they are to be found in any case (fold); ok is false when no
// such set is known.
func required(t *syntax.Regexp) (lits []string, fold, ok bool) {
	switch t.Op {
	case syntax.OpLiteral:
		l := string(t.Rune)
		if t.Flags&syntax.FoldCase == 0 {
			return []string{l}, false, true
		}
		// Found by lowering ASCII: a literal of other letters, or of k or s
		// (which fold with U+212A and U+017F), is not.
		for _, r := range l {
			if r >= 0x80 || r == 'k' || r == 'K' || r == 's' || r == 'S' {
				return nil, false, false
			}
		}
		return []string{asciiLower(l)}, true, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpConcat:
		// Runs of factors whose text is one of a few strings give
		// their products (the parser turns a|b into a common prefix
		// and the rests); of those and the other factors' strings, the
		// set whose shortest is longest picks the fewest lines.
		best := 0
		consider := func(l []string, f bool) {
			if len(l) == 0 {
				return
			}
			short := len(l[0])
			for _, x := range l {
				short = min(short, len(x))
			}
			if short > best {
				best, lits, fold = short, l, f
			}
		}
		run, runFold, inRun := []string{""}, false, false
		for _, sub := range t.Sub {
			if e, f, ok := exact(sub); ok && (!inRun || f == runFold || allEmpty(e) || allEmpty(run)) && len(run)*len(e) <= maxLits {
				run, runFold, inRun = product(run, e), runFold || f, true
				continue
			}
			consider(run, runFold)
			run, runFold, inRun = []string{""}, false, false
			if e, f, ok := exact(sub); ok {
				run, runFold, inRun = e, f, true
				continue
			}
			if l, f, ok := required(sub); ok {
				consider(l, f)
			}
		}
		consider(run, runFold)
		return lits, fold, best > 0
	case syntax.OpAlternate:
		for _, sub := range t.Sub {
			l, f, ok := required(sub)
			if !ok || len(lits)+len(l) > maxLits || (len(lits) > 0 && f != fold) {
				return nil, false, false
			}
			lits, fold = append(lits, l...), f
		}
		return lits, fold, len(lits) > 0
	}
	return nil, false, false
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
		s.test(raw, at+int64(end), lineOf(end))
		pos = e + 1
	}
}

// plain searches run, whole lines without escape sequences, which begins at
// index base of the text lineOf counts in.
func (s *searcher) plain(run string, at int64, base int, lineOf func(int) int64) {
	if len(s.lits) > 0 {
		s.byLiterals(run, at, base, lineOf)
		return
	}
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

// byLiterals is plain for a pattern with required strings: each line that
// holds one is tested.
func (s *searcher) byLiterals(run string, at int64, base int, lineOf func(int) int64) {
	hay := run
	if s.fold {
		s.lower = appendASCIILower(s.lower[:0], run)
		hay = unsafeString(s.lower)
	}
	next := make([]int, len(s.lits)) // where each string is next found, from p
	for i := range next {
		next[i] = -2 // not looked for yet
	}
	p := 0
	for p < len(run) {
		m := -1
		for i, l := range s.lits {
			if next[i] != -1 && next[i] < p {
				next[i] = strings.Index(hay[p:], l)
				if next[i] >= 0 {
					next[i] += p
				}
			}
			if next[i] >= 0 && (m < 0 || next[i] < m) {
				m = next[i]
			}
		}
		if m < 0 {
			return
		}
		ls := strings.LastIndexByte(run[:m], '\n') + 1
		le := ls + strings.IndexByte(run[ls:], '\n')
		if s.line.MatchString(run[ls:le]) {
			s.hit(run[ls:le], at+int64(ls), lineOf(base+ls))
		}
		p = le + 1
	}
}

// exact returns every string t matches, when they are few literals (zero-
// width assertions match ""), and whether they are to be found in any
// case.
func exact(t *syntax.Regexp) ([]string, bool, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		return required(t)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, false, true
	case syntax.OpCapture:
		return exact(t.Sub[0])
	case syntax.OpAlternate:
		var out []string
		fold := false
		for i, sub := range t.Sub {
			e, f, ok := exact(sub)
			if !ok || len(out)+len(e) > maxLits || (i > 0 && f != fold && !allEmpty(e)) {
				return nil, false, false
			}
			out, fold = append(out, e...), fold || f
		}
		return out, fold, true
	case syntax.OpConcat:
		out, fold := []string{""}, false
		for _, sub := range t.Sub {
			e, f, ok := exact(sub)
			if !ok || len(out)*len(e) > maxLits || (f != fold && !allEmpty(e) && !allEmpty(out)) {
				return nil, false, false
			}
			out, fold = product(out, e), fold || f
		}
		return out, fold, true
	}
	return nil, false, false
}

func allEmpty(l []string) bool {
	for _, x := range l {
		if x != "" {
			return false
		}
	}
	return true
}

// product is every string of a followed by one of b.
func product(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

// test tests one line as it is shown.
func (s *searcher) test(line string, at, n int64) {
	shown := line
	if strings.ContainsAny(line, "\x1b\r") {
		shown = string(textclean.CleanLine([]byte(line)))
	}
	if s.line.MatchString(shown) {
		s.hit(shown, at, n)
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

// unsafeString views b as a string without a copy; b is not changed while
// the string is in use (one byLiterals call).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendASCIILower appends s with its ASCII letters in lower case; other
// bytes stay as they are, so offsets are those of s.
func appendASCIILower(b []byte, s string) []byte {
	n := len(b)
	b = append(b, s...)
	for i := n; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

func asciiLower(s string) string { return string(appendASCIILower(nil, s)) }
