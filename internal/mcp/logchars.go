package mcp

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// log's character unit, OpenClaw's: offset and limit slice the output's
// characters as a string slice does. The characters are those of the
// cleaned output (escape sequences stripped, carriage-return overwrites
// collapsed), the text every result shows; one character is one Unicode
// code point.
const (
	// defaultLogChars is a page without limit.
	defaultLogChars = 20000
)

// charScanLines is how many lines one step of the scan for an offset
// reads (a variable so that tests can make steps small).
var charScanLines int64 = 5000

// charPage is log's output_info with unit=chars.
type charPage struct {
	// Offset is the first character shown (from 0), when known: a tail
	// (no offset given) says only how much came before it, in bytes.
	Offset *int64 `json:"offset,omitempty"`
	Chars  int64  `json:"chars"`
	// NextOffset continues reading after the page.
	NextOffset    *int64 `json:"next_offset,omitempty"`
	TotalBytes    int64  `json:"total_bytes"`
	TotalLines    int64  `json:"total_lines"`
	OmittedBefore int64  `json:"omitted_before,omitempty"`
	Evicted       int64  `json:"evicted,omitempty"`
	Truncated     bool   `json:"truncated,omitempty"`
	Note          string `json:"note,omitempty"`
}

// logChars is log with unit=chars: the limit characters from offset, or
// the last limit characters without one.
func (s *server) logChars(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	limit := int64(defaultLogChars)
	var notes []string
	if in.Limit != nil && *in.Limit > 0 {
		limit = int64(*in.Limit)
	}
	if limit > maxPageChars {
		notes = append(notes, fmt.Sprintf("limit capped at %d characters (asked %d); page on with offset=next_offset", maxPageChars, limit))
		limit = maxPageChars
	}
	r := jobs.Range{Stream: jobs.Stream(in.Stream), Grep: in.Grep, Clean: true}
	var (
		text string
		p    charPage
		err  error
	)
	if in.Offset == nil {
		r.Tail = limit
		var o jobs.Output
		o, err = s.c.Log(ctx, ref, r)
		if err == nil {
			text = o.Text
			p = charPage{TotalBytes: o.TotalBytes, TotalLines: o.TotalLines, OmittedBefore: o.OmittedBefore, Evicted: o.Evicted, Truncated: o.Truncated}
			if o.OmittedBefore > 0 {
				notes = append(notes, fmt.Sprintf("the last %d characters; %s of output before them (offset=0 reads from the start)", utf8.RuneCountInString(text), size(o.OmittedBefore)))
			}
		}
	} else {
		off := int64(*in.Offset)
		text, p, err = s.sliceChars(ctx, ref, r, off, limit)
		if err == nil {
			p.Offset = &off
			p.Chars = int64(utf8.RuneCountInString(text))
			// The characters shown, first and last, counted from 0 as
			// offset counts them.
			shown := fmt.Sprintf("characters %d-%d shown", off, off+p.Chars-1)
			switch {
			case p.Chars == 0 && off > 0:
				notes = append(notes, fmt.Sprintf("offset %d is at or past the end of the output", off))
			case p.Chars == 0:
				notes = append(notes, "no output")
			case p.NextOffset != nil:
				notes = append(notes, fmt.Sprintf("%s; more after: continue with offset=%d", shown, *p.NextOffset))
			default:
				notes = append(notes, shown+", to the end")
			}
		}
	}
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	p.Chars = int64(utf8.RuneCountInString(text))
	if p.Evicted > 0 {
		notes = append(notes, fmt.Sprintf("%s of the output was removed by the output cap or a clear", size(p.Evicted)))
	}
	res := logResult{SessionID: ref, Unit: "chars", Output: text, OutputInfo: &p}
	if note := s.logState(ctx, ref, &res); note != "" {
		notes = append(notes, note)
	}
	p.Note = strings.Join(notes, "; ")
	line := fmt.Sprintf("log of session %s", textclean.Echo(ref))
	if p.Note != "" {
		line += ": " + p.Note
	}
	return resultWith(line, &outputView{Text: text}, res)
}

// sliceChars reads the characters [off, off+limit) of the cleaned output,
// scanning it from the start charScanLines lines at a time: whole lines
// never split a character, an escape sequence or a carriage-return
// overwrite, so each step cleans as the whole output would.
func (s *server) sliceChars(ctx context.Context, ref string, r jobs.Range, off, limit int64) (string, charPage, error) {
	var (
		b    strings.Builder
		seen int64 // characters before the current step
		got  int64
		p    charPage
	)
	r.FromLine, r.Lines = 1, charScanLines
	for {
		o, err := s.c.Log(ctx, ref, r)
		if err != nil {
			return "", p, err
		}
		p.TotalBytes, p.TotalLines = o.TotalBytes, o.TotalLines
		p.Evicted += o.Evicted
		text := o.Text
		n := int64(utf8.RuneCountInString(text))
		if seen+n > off {
			if seen < off {
				text = dropRunes(text, off-seen)
			}
			taken := takeRunes(text, limit-got)
			b.WriteString(taken)
			got += int64(utf8.RuneCountInString(taken))
		}
		seen += n
		last := o.Lines == 0 || o.FirstLine+o.Lines > o.TotalLines
		if got == limit {
			if seen > off+got || !last {
				next := off + got
				p.NextOffset = &next
			}
			return b.String(), p, nil
		}
		if last {
			return b.String(), p, nil
		}
		r.FromLine = o.FirstLine + o.Lines
	}
}

// dropRunes drops the first n runes of s.
func dropRunes(s string, n int64) string {
	for i := range s {
		if n == 0 {
			return s[i:]
		}
		n--
	}
	return ""
}

// takeRunes keeps the first n runes of s.
func takeRunes(s string, n int64) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
