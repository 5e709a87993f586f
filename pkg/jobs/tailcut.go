package jobs

import (
	"bytes"
	"context"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/textclean"
)

// render is the text of raw output bytes: cleaned, or as they are.
func render(b []byte, clean bool) string {
	if clean {
		return textclean.Clean(b)
	}
	return string(b)
}

// tailStart chooses where a tail of at most n characters starts in data,
// and returns that index and the text of data from there (cleaned when
// clean). The text is always what data[pos:] renders to, so a read of the
// raw bytes from pos gives back exactly the text, and it starts at a line
// when it can: at the earliest line start whose text fits. Only when the
// last line alone has more than n characters does it start inside that
// line, at its earliest character whose text fits.
//
// Positions before from are not output (data[:from] is context that says
// whether from begins a line); from begins a line when fromIsLine.
func tailStart(data []byte, from int, fromIsLine bool, n int64, clean bool) (int, string) {
	fits := func(s string) bool { return int64(utf8.RuneCountInString(s)) <= n }
	var starts []int // line starts at or after from, oldest first
	if fromIsLine {
		starts = append(starts, from)
	}
	for i := from; i < len(data)-1; i++ {
		if data[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	if len(starts) > 0 {
		// Cleaning works line by line: count back from the end, one line
		// at a time, to the earliest line start whose text fits, then
		// check it with a render of its own.
		k, chars := len(starts), int64(0)
		for k > 0 {
			end := len(data)
			if k < len(starts) {
				end = starts[k]
			}
			c := int64(utf8.RuneCountInString(render(data[starts[k-1]:end], clean)))
			if chars+c > n {
				break
			}
			chars += c
			k--
		}
		if k < len(starts) {
			if text := render(data[starts[k]:], clean); fits(text) {
				return starts[k], text
			}
			// Cleaning did not keep the lines apart (a NEL, a sequence
			// left open across a newline): search the starts.
			lo, hi := 0, len(starts)
			for lo < hi {
				mid := (lo + hi) / 2
				if fits(render(data[starts[mid]:], clean)) {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			if lo < len(starts) {
				if text := render(data[starts[lo]:], clean); fits(text) {
					return starts[lo], text
				}
			}
		}
		from = starts[len(starts)-1]
	}
	// The last line alone is longer than n characters: start inside it.
	if !clean {
		i := len(data)
		for k := int64(0); k < n && i > from; k++ {
			_, size := utf8.DecodeLastRune(data[from:i])
			i -= size
		}
		return i, string(data[i:])
	}
	lo, hi := from, len(data)
	for lo < hi {
		mid := runeStart(data, (lo+hi)/2, hi)
		if mid >= hi {
			break
		}
		if fits(render(data[mid:], clean)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	pos := runeStart(data, lo, len(data))
	return pos, render(data[pos:], clean)
}

// runeStart is the first index at or after i (and before limit) that
// begins a UTF-8 character, or limit.
func runeStart(data []byte, i, limit int) int {
	for i < limit && !utf8.RuneStart(data[i]) {
		i++
	}
	return i
}

// placeTail fills out's offsets and line numbers for the text that
// data[pos:] renders to, where data is the page p's bytes cut to end at
// offset end. A tail reads back from the end, so the text's first byte is
// end minus its length unless it crosses a gap (bytes the cap, a clear or
// a full disk left out); with a gap in the page a read of that range tells
// which.
func (c *Client) placeTail(ctx context.Context, id string, out *Output, p logs.Page, data []byte, pos int, end int64) {
	text := data[pos:]
	nl := int64(bytes.Count(text, []byte{'\n'}))
	start := end - int64(len(text))
	linesBefore := p.LinesBefore + p.Lines - nl // newlines before start
	gap := int64(0)
	if p.Gap > 0 {
		q, err := logs.ReadRange(ctx, c.db, id, start, int64(len(text)), logs.Filter{})
		if err != nil || q.Gap > 0 || q.Start != start || !bytes.Equal(q.Data, text) {
			// The text crosses the gap: it starts where the page does.
			start = p.Start + int64(pos)
			linesBefore = p.LinesBefore + int64(bytes.Count(data[:pos], []byte{'\n'}))
			gap = end - start - int64(len(text))
		}
	}
	out.Start, out.End, out.NextOffset = start, end, end
	out.FirstLine, out.Lines = linesBefore+FirstLine, nl
	out.OmittedBefore = start
	out.OmittedAfter = max(p.TotalBytes-end, 0)
	out.Evicted = gap
}
