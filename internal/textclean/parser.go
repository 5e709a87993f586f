package textclean

// maxParams bounds the CSI parameters kept; later ones are ignored, as a
// terminal ignores them.
const maxParams = 16

// Actor is what a Parser tells about the output it reads: the characters
// to show, the controls to execute, the control sequences to interpret.
// Everything else (OSC, DCS, SOS, PM and APC strings, two-byte ESC
// sequences, private or malformed control sequences) is consumed silently.
type Actor interface {
	// Print shows one character: utf8.RuneError for an invalid byte.
	Print(r rune)
	// Execute acts on a C0 control character other than ESC, CAN and
	// SUB (which the parser acts on itself), or DEL. NEL (ESC E or
	// U+0085) is executed as '\n'.
	Execute(c rune)
	// Dispatch interprets a complete control sequence without a private
	// marker or intermediate bytes.
	Dispatch(final rune, p Params)
}

// Params are a control sequence's numeric parameters, ';' or ':'
// separated; a missing one reads as 0.
type Params struct {
	v [maxParams]int
	n int
}

// Len is how many parameters the sequence has.
func (p *Params) Len() int { return min(p.n, maxParams) }

// At returns parameter i, or 0 when it is missing.
func (p *Params) At(i int) int {
	if i >= p.n || i >= maxParams {
		return 0
	}
	return p.v[i]
}

// Or returns parameter i, or def when it is missing or zero (zero means
// "default" for most sequences).
func (p *Params) Or(i, def int) int {
	if v := p.At(i); v != 0 {
		return v
	}
	return def
}

// Parser splits terminal output into what a terminal acts on, after the
// VT500-series parser that xterm and most terminals follow. It is the one
// reading of escape sequences in jobs: cleaning text for agents (Cleaner)
// and rendering it for the web view both act on what it reports, so the two
// never disagree about where a sequence ends. Its input is decoded
// characters; the caller decodes UTF-8 and may split input anywhere
// between characters. The zero value is ready to use.
type Parser struct {
	st      state
	params  Params
	private bool // CSI with a private marker (<=>?): nothing to interpret
	inter   bool // CSI with intermediate bytes: nothing to interpret
	bad     bool // malformed CSI: swallowed up to its final byte
}

// state is where the parser stands.
type state uint8

const (
	stGround    state = iota // plain text
	stEsc                    // after ESC
	stEscInter               // after ESC and intermediate bytes (ESC ( B)
	stCSI                    // control sequence: ESC [ or U+009B
	stString                 // OSC, DCS, SOS, PM or APC body, up to BEL or ST
	stStringEsc              // ESC inside a string: ST if a backslash follows
)

// Ground reports whether the parser is between sequences: everything read
// so far has been acted on.
func (p *Parser) Ground() bool { return p.st == stGround }

// Reset forgets a sequence being read.
func (p *Parser) Reset() { *p = Parser{} }

// Rune reads one character (utf8.RuneError for an invalid byte) and tells
// a what it means.
func (p *Parser) Rune(r rune, a Actor) {
	switch p.st {
	case stString:
		switch r {
		case 0x07, 0x9c, 0x18, 0x1a: // BEL, ST, CAN, SUB end the string
			p.st = stGround
		case 0x1b:
			p.st = stStringEsc
		case '\n':
			// Strings never hold a newline in practice. Ending one here
			// means a stray introducer swallows at most one line of
			// output instead of everything after it.
			p.st = stGround
			a.Execute('\n')
		}
		return
	case stStringEsc:
		if r == '\\' {
			p.st = stGround
			return
		}
		// Any other ESC sequence ends the string and begins anew.
		p.st = stEsc
	}

	if r < 0x20 || r == 0x7f {
		// C0 controls act even in the middle of a sequence, as in a
		// terminal.
		switch r {
		case 0x1b:
			p.st = stEsc
		case 0x18, 0x1a: // CAN, SUB abort a sequence
			p.st = stGround
		default:
			a.Execute(r)
		}
		return
	}
	if r >= 0x80 && r <= 0x9f {
		p.c1(r, a)
		return
	}

	switch p.st {
	case stGround:
		a.Print(r)
	case stEsc:
		p.esc(r, a)
	case stEscInter:
		switch {
		case r >= 0x20 && r <= 0x2f:
		case r >= 0x30 && r <= 0x7e:
			p.st = stGround
		default: // not part of a sequence: drop the sequence, keep the text
			p.st = stGround
			a.Print(r)
		}
	case stCSI:
		p.csi(r, a)
	}
}

// c1 acts on a C1 control character (U+0080–U+009F), the 8-bit forms of
// ESC @ … ESC _.
func (p *Parser) c1(r rune, a Actor) {
	switch r {
	case 0x9b: // CSI
		p.startCSI()
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f: // OSC, DCS, SOS, PM, APC
		p.st = stString
	case 0x85: // NEL
		p.st = stGround
		a.Execute('\n')
	default:
		p.st = stGround
	}
}

// esc reads the character after ESC.
func (p *Parser) esc(r rune, a Actor) {
	switch {
	case r == '[':
		p.startCSI()
	case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
		p.st = stString
	case r >= 0x20 && r <= 0x2f:
		p.st = stEscInter
	case r == 'E': // NEL
		p.st = stGround
		a.Execute('\n')
	case r >= 0x30 && r <= 0x7e:
		p.st = stGround
	default: // a lone ESC before text: drop the ESC, keep the text
		p.st = stGround
		a.Print(r)
	}
}

func (p *Parser) startCSI() {
	p.st = stCSI
	p.params = Params{}
	p.private, p.inter, p.bad = false, false, false
}

// csi reads one character of a control sequence.
func (p *Parser) csi(r rune, a Actor) {
	ps := &p.params
	switch {
	case r >= '0' && r <= '9':
		if p.inter {
			p.bad = true
			return
		}
		if ps.n == 0 {
			ps.n = 1
		}
		if i := ps.n - 1; i < maxParams && ps.v[i] < 1e6 {
			ps.v[i] = ps.v[i]*10 + int(r-'0')
		}
	case r == ';' || r == ':':
		if p.inter {
			p.bad = true
			return
		}
		if ps.n == 0 {
			ps.n = 1
		}
		ps.n++
	case r >= '<' && r <= '?':
		if ps.n > 0 || p.inter {
			p.bad = true
		}
		p.private = true
	case r >= 0x20 && r <= 0x2f:
		p.inter = true
	case r >= 0x40 && r <= 0x7e:
		p.st = stGround
		if !p.private && !p.inter && !p.bad {
			a.Dispatch(r, *ps)
		}
	default: // not part of a sequence: drop the sequence, keep the text
		p.st = stGround
		a.Print(r)
	}
}
