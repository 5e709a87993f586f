package textclean

import (
	"slices"
	"unicode/utf8"
)

// maxCol bounds how far cursor movement may pad a line with spaces. A
// terminal stops at its right margin; without a bound, "\x1b[999999999C"
// followed by one character would ask for a gigabyte of spaces.
const maxCol = 1024

// maxParams bounds the CSI parameters kept; later ones are ignored, as a
// terminal ignores them.
const maxParams = 16

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

	st      state
	params  [maxParams]int
	nparams int  // parameters completed so far, plus the one being read
	private bool // CSI with a private marker (<=>?): nothing to interpret
	inter   bool // CSI with intermediate bytes: nothing to interpret
	bad     bool // malformed CSI: swallowed up to its final byte
}

// state is where the escape-sequence parser stands, after the VT500-series
// parser that xterm and most terminals follow.
type state uint8

const (
	stGround    state = iota // plain text
	stEsc                    // after ESC
	stEscInter               // after ESC and intermediate bytes (ESC ( B)
	stCSI                    // control sequence: ESC [ or U+009B
	stString                 // OSC, DCS, SOS, PM or APC body, up to BEL or ST
	stStringEsc              // ESC inside a string: ST if a backslash follows
)

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
// parser.
func (c *Cleaner) handle(r rune) {
	switch c.st {
	case stString:
		switch r {
		case 0x07, 0x9c, 0x18, 0x1a: // BEL, ST, CAN, SUB end the string
			c.st = stGround
		case 0x1b:
			c.st = stStringEsc
		case '\n':
			// Strings never hold a newline in practice. Ending one here
			// means a stray introducer swallows at most one line of
			// output instead of everything after it.
			c.st = stGround
			c.newline()
		}
		return
	case stStringEsc:
		if r == '\\' {
			c.st = stGround
			return
		}
		// Any other ESC sequence ends the string and begins anew.
		c.st = stEsc
	}

	if r < 0x20 || r == 0x7f {
		// C0 controls act even in the middle of a sequence, as in a
		// terminal.
		c.control(r)
		return
	}
	if r >= 0x80 && r <= 0x9f {
		c.c1(r)
		return
	}

	switch c.st {
	case stGround:
		c.put(r)
	case stEsc:
		c.esc(r)
	case stEscInter:
		switch {
		case r >= 0x20 && r <= 0x2f:
		case r >= 0x30 && r <= 0x7e:
			c.st = stGround
		default: // not part of a sequence: drop the sequence, keep the text
			c.st = stGround
			c.put(r)
		}
	case stCSI:
		c.csi(r)
	}
}

// control executes a C0 control character or DEL.
func (c *Cleaner) control(r rune) {
	switch r {
	case 0x1b:
		c.st = stEsc
	case 0x18, 0x1a: // CAN, SUB abort a sequence
		c.st = stGround
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

// c1 executes a C1 control character (U+0080–U+009F), the 8-bit forms of
// ESC @ … ESC _.
func (c *Cleaner) c1(r rune) {
	switch r {
	case 0x9b: // CSI
		c.startCSI()
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f: // OSC, DCS, SOS, PM, APC
		c.st = stString
	case 0x85: // NEL
		c.st = stGround
		c.newline()
	default:
		c.st = stGround
	}
}

// esc handles the character after ESC.
func (c *Cleaner) esc(r rune) {
	switch {
	case r == '[':
		c.startCSI()
	case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
		c.st = stString
	case r >= 0x20 && r <= 0x2f:
		c.st = stEscInter
	case r == 'E': // NEL
		c.st = stGround
		c.newline()
	case r >= 0x30 && r <= 0x7e:
		c.st = stGround
	default: // a lone ESC before text: drop the ESC, keep the text
		c.st = stGround
		c.put(r)
	}
}

func (c *Cleaner) startCSI() {
	c.st = stCSI
	c.params = [maxParams]int{}
	c.nparams = 0
	c.private, c.inter, c.bad = false, false, false
}

// csi handles one character of a control sequence.
func (c *Cleaner) csi(r rune) {
	switch {
	case r >= '0' && r <= '9':
		if c.inter {
			c.bad = true
			return
		}
		if c.nparams == 0 {
			c.nparams = 1
		}
		if i := c.nparams - 1; i < maxParams && c.params[i] < 1e6 {
			c.params[i] = c.params[i]*10 + int(r-'0')
		}
	case r == ';' || r == ':':
		if c.inter {
			c.bad = true
			return
		}
		if c.nparams == 0 {
			c.nparams = 1
		}
		c.nparams++
	case r >= '<' && r <= '?':
		if c.nparams > 0 || c.inter {
			c.bad = true
		}
		c.private = true
	case r >= 0x20 && r <= 0x2f:
		c.inter = true
	case r >= 0x40 && r <= 0x7e:
		c.st = stGround
		if !c.private && !c.inter && !c.bad {
			c.dispatch(r)
		}
	default: // not part of a sequence: drop the sequence, keep the text
		c.st = stGround
		c.put(r)
	}
}

// param returns CSI parameter i, or def when it is missing or zero (zero
// means "default" for the sequences interpreted here).
func (c *Cleaner) param(i, def int) int {
	if i >= c.nparams || i >= maxParams || c.params[i] == 0 {
		return def
	}
	return c.params[i]
}

// dispatch interprets the control sequences that edit the current line;
// all others are dropped.
func (c *Cleaner) dispatch(final rune) {
	switch final {
	case 'K': // EL: erase in line
		switch c.param(0, 0) {
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
		c.col = c.clampCol(c.param(0, 1) - 1)
	case 'C', 'a': // CUF, HPR: cursor forward
		c.col = c.clampCol(c.col + c.param(0, 1))
	case 'D': // CUB: cursor back
		c.col = max(0, c.col-c.param(0, 1))
	case 'X': // ECH: erase characters
		n := c.param(0, 1)
		for i := c.col; i < len(c.line) && i-c.col < n; i++ {
			c.line[i] = ' '
			c.edited = true
		}
	case 'P': // DCH: delete characters
		if c.col < len(c.line) {
			n := min(c.param(0, 1), len(c.line)-c.col)
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
