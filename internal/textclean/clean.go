package textclean

import (
	"slices"
	"unicode/utf8"
)

// maxCol bounds how far cursor movement may pad a line with spaces. A
// terminal stops at its right margin; without a bound, "\x1b[999999999C"
// followed by one character would ask for a gigabyte of spaces.
const maxCol = 1024

// Clean returns b as plain text, rendered the way a terminal would leave
// each line (see the package documentation for the rules).
func Clean(b []byte) string {
	var c Cleaner
	c.out = make([]byte, 0, len(b))
	c.Write(b)
	return c.String()
}

// Cleaner cleans output that arrives in pieces. Bytes written in any split
// clean to the same text as Clean of their concatenation: an escape
// sequence, a UTF-8 character or a line being redrawn may span writes.
// The zero value is ready to use. A Cleaner is not safe for concurrent use.
type Cleaner struct {
	out  []byte // finished lines, cleaned
	pend []byte // an incomplete UTF-8 character at the end of the last write

	line   []rune // the line being written, as a terminal shows it now
	col    int    // cursor column in line
	edited bool   // something was overwritten, erased or padded on this line

	p Parser
}

// Write cleans p. It never fails; the error is there for io.Writer.
func (c *Cleaner) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.pend) > 0 {
		// Rare: a character split across writes. Rejoin it and carry on.
		p = append(c.pend, p...)
		c.pend = nil
	}
	for len(p) > 0 {
		if b := p[0]; b < utf8.RuneSelf {
			c.handle(rune(b))
			p = p[1:]
			continue
		}
		if !utf8.FullRune(p) {
			c.pend = append([]byte(nil), p...)
			break
		}
		r, size := utf8.DecodeRune(p) // utf8.RuneError for invalid bytes
		c.handle(r)
		p = p[size:]
	}
	return n, nil
}

// String returns the text cleaned so far, as if the input ended here: the
// line still being written is included in its current state, a trailing
// incomplete escape sequence is left out, and a trailing incomplete UTF-8
// character reads as U+FFFD. It does not change the Cleaner; later writes
// continue where the input left off.
func (c *Cleaner) String() string {
	if len(c.pend) == 0 {
		return string(c.appendLine(slices.Clip(c.out)))
	}
	tmp := *c
	tmp.out = nil
	tmp.line = slices.Clone(c.line)
	tmp.pend = nil
	for range c.pend {
		// Each byte of an unfinished character is invalid on its own.
		tmp.handle(utf8.RuneError)
	}
	b := append(slices.Clip(c.out), tmp.out...)
	return string(tmp.appendLine(b))
}

// TakeLines returns the finished lines cleaned since the last call, each
// ending in a newline, and forgets them; the line still being written stays
// in the Cleaner. It keeps memory bounded when following a long output.
func (c *Cleaner) TakeLines() string {
	s := string(c.out)
	c.out = c.out[:0]
	return s
}

// Reset forgets everything written, as if the Cleaner were new.
func (c *Cleaner) Reset() {
	*c = Cleaner{out: c.out[:0], line: c.line[:0]}
}

// handle feeds one character (or utf8.RuneError for an invalid byte) to the
// parser, which acts on the Cleaner's line.
func (c *Cleaner) handle(r rune) { c.p.Rune(r, (*lineActor)(c)) }

// lineActor is the Cleaner as the parser's Actor: its methods edit the
// line being written, as a terminal would.
type lineActor Cleaner

func (l *lineActor) Print(r rune) { (*Cleaner)(l).put(r) }

// Execute acts on a C0 control character or DEL.
func (l *lineActor) Execute(r rune) {
	c := (*Cleaner)(l)
	switch r {
	case '\n':
		c.newline()
	case '\r':
		c.col = 0
	case '\b':
		if c.col > 0 {
			c.col--
		}
	case '\t':
		c.put('\t')
	case 0:
		// A terminal shows nothing for NUL, but text that lost a byte
		// without a sign misleads its reader ("a\0b" is not "ab"): it is
		// written as its escape, as Escape writes it.
		for _, e := range `\x00` {
			c.put(e)
		}
	}
	// Everything else (BEL, DEL, ...) shows nothing.
}

func (l *lineActor) Dispatch(final rune, p Params) { (*Cleaner)(l).dispatch(final, &p) }

// dispatch interprets the control sequences that edit the current line;
// all others are dropped.
func (c *Cleaner) dispatch(final rune, p *Params) {
	switch final {
	case 'K': // EL: erase in line
		switch p.Or(0, 0) {
		case 0:
			if c.col < len(c.line) {
				c.line = c.line[:c.col]
				c.edited = true
			}
		case 1:
			for i := 0; i <= c.col && i < len(c.line); i++ {
				c.line[i] = ' '
			}
			c.edited = true
		case 2:
			c.line = c.line[:0]
			c.edited = true
		}
	case 'G', '`': // CHA, HPA: cursor to column
		c.col = c.clampCol(p.Or(0, 1) - 1)
	case 'C', 'a': // CUF, HPR: cursor forward
		c.col = c.clampCol(c.col + p.Or(0, 1))
	case 'D': // CUB: cursor back
		c.col = max(0, c.col-p.Or(0, 1))
	case 'X': // ECH: erase characters
		n := p.Or(0, 1)
		for i := c.col; i < len(c.line) && i-c.col < n; i++ {
			c.line[i] = ' '
			c.edited = true
		}
	case 'P': // DCH: delete characters
		if c.col < len(c.line) {
			n := min(p.Or(0, 1), len(c.line)-c.col)
			c.line = append(c.line[:c.col], c.line[c.col+n:]...)
			c.edited = true
		}
	}
}

// clampCol keeps cursor movement within the line or maxCol, whichever is
// wider.
func (c *Cleaner) clampCol(col int) int {
	return min(col, max(len(c.line), maxCol))
}

// put writes one character at the cursor, overwriting what is there. An
// invisible character (a bidirectional control, a zero-width character) is
// written as its \uNNNN escape, one column per character of it.
func (c *Cleaner) put(r rune) {
	if Invisible(r) {
		var buf [6]byte
		for _, e := range AppendRuneEscape(buf[:0], r) {
			c.put(rune(e))
		}
		return
	}
	switch {
	case c.col < len(c.line):
		c.line[c.col] = r
		c.edited = true
	default:
		for len(c.line) < c.col {
			c.line = append(c.line, ' ')
			c.edited = true
		}
		c.line = append(c.line, r)
	}
	c.col++
}

// newline finishes the current line.
func (c *Cleaner) newline() {
	c.out = c.appendLine(c.out)
	c.out = append(c.out, '\n')
	c.line = c.line[:0]
	c.col = 0
	c.edited = false
}

// appendLine appends the current line as text. Trailing spaces of a line
// that was redrawn are dropped: they are what "\b \b" or a shorter redraw
// left behind, not output.
func (c *Cleaner) appendLine(b []byte) []byte {
	line := c.line
	if c.edited {
		for len(line) > 0 && line[len(line)-1] == ' ' {
			line = line[:len(line)-1]
		}
	}
	for _, r := range line {
		b = utf8.AppendRune(b, r)
	}
	return b
}

// TailChars returns the last n characters (runes) of s and how many
// characters before them were left out. n <= 0 returns "" and the count of
// all of s. It never splits a UTF-8 character.
func TailChars(s string, n int) (string, int) {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:], utf8.RuneCountInString(s[:i])
}
