package ui

import (
	"html"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
)

// sgr is the graphic rendition in force: what ESC [ … m last set. Colours
// are palette indexes (0-255) or -1 for the default; truecolour is mapped to
// the nearest palette entry, because the page's content security policy
// allows no inline style, only classes.
type sgr struct {
	fg, bg                               int
	bold, dim, italic, underline, invert bool
}

func newSGR() sgr { return sgr{fg: -1, bg: -1} }

// classes renders the state as CSS classes ("" for the default).
func (s sgr) classes() string {
	var c []string
	fg, bg := s.fg, s.bg
	if s.invert {
		fg, bg = bg, fg
		if fg < 0 {
			fg = 256 // the page's background colour
		}
		if bg < 0 {
			bg = 257 // the page's text colour
		}
	}
	if fg >= 0 {
		c = append(c, "f"+strconv.Itoa(fg))
	}
	if bg >= 0 {
		c = append(c, "g"+strconv.Itoa(bg))
	}
	if s.bold {
		c = append(c, "b")
	}
	if s.dim {
		c = append(c, "d")
	}
	if s.italic {
		c = append(c, "i")
	}
	if s.underline {
		c = append(c, "u")
	}
	return strings.Join(c, " ")
}

// apply reads the parameters of one SGR sequence; no parameter resets.
func (s *sgr) apply(ps *textclean.Params) {
	if ps.Len() == 0 {
		*s = newSGR()
		return
	}
	n := func(i int) int {
		if i >= ps.Len() {
			return -1
		}
		return ps.At(i)
	}
	for i := 0; i < ps.Len(); i++ {
		p := n(i)
		switch {
		case p == 0:
			*s = newSGR()
		case p == 1:
			s.bold = true
		case p == 2:
			s.dim = true
		case p == 3:
			s.italic = true
		case p == 4:
			s.underline = true
		case p == 7:
			s.invert = true
		case p == 22:
			s.bold, s.dim = false, false
		case p == 23:
			s.italic = false
		case p == 24:
			s.underline = false
		case p == 27:
			s.invert = false
		case p >= 30 && p <= 37:
			s.fg = p - 30
		case p == 39:
			s.fg = -1
		case p >= 40 && p <= 47:
			s.bg = p - 40
		case p == 49:
			s.bg = -1
		case p >= 90 && p <= 97:
			s.fg = p - 90 + 8
		case p >= 100 && p <= 107:
			s.bg = p - 100 + 8
		case p == 38 || p == 48:
			c := -1
			switch n(i + 1) {
			case 5:
				if v := n(i + 2); v >= 0 && v <= 255 {
					c = v
				}
				i += 2
			case 2:
				r, g, b := n(i+2), n(i+3), n(i+4)
				if r >= 0 && g >= 0 && b >= 0 {
					c = nearest256(r, g, b)
				}
				i += 4
			}
			if c >= 0 {
				if p == 38 {
					s.fg = c
				} else {
					s.bg = c
				}
			}
		}
	}
}

// nearest256 maps an RGB colour to the 6x6x6 cube of the 256-colour palette.
func nearest256(r, g, b int) int {
	q := func(v int) int {
		v = min(max(v, 0), 255)
		if v < 48 {
			return 0
		}
		return min((v-35)/40, 5)
	}
	return 16 + 36*q(r) + 6*q(g) + q(b)
}

// renderer turns terminal output into HTML: text escaped, SGR colours as
// spans with classes, every other escape sequence dropped, other control
// characters shown as visible symbols. Nothing in the output can become
// markup. It reads escape sequences with textclean's Parser, the one
// reading of them that cleaning for agents uses too, and keeps the colour
// state between calls, for a stream.
type renderer struct {
	st sgr
	p  textclean.Parser

	b    strings.Builder
	text []byte // shown characters not yet escaped into b
	open bool   // a span is open in b
	cr   bool   // a carriage return was read: a line feed or a redraw follows
}

func newRenderer() *renderer { return &renderer{st: newSGR()} }

// render converts data and returns the HTML and how many bytes of data it
// consumed. Unless final, an escape sequence, a UTF-8 character or a
// carriage return cut at the end is left unconsumed for the next call,
// which starts with it.
func (r *renderer) render(data []byte, final bool) (string, int) {
	r.b.Reset()
	r.text = r.text[:0]
	r.open = false
	r.setSpan()
	// done is where the input was last between sequences, with what the
	// HTML held then: a cut is rolled back to it.
	done, doneLen, doneSt, doneOpen := 0, r.b.Len(), r.st, r.open
	settle := func(i int) {
		if r.p.Ground() && !r.cr {
			r.flush()
			done, doneLen, doneSt, doneOpen = i, r.b.Len(), r.st, r.open
		}
	}
	i := 0
	for i < len(data) {
		ru, size := rune(data[i]), 1
		if ru >= utf8.RuneSelf {
			if !final && !utf8.FullRune(data[i:]) {
				break
			}
			ru, size = utf8.DecodeRune(data[i:]) // utf8.RuneError for an invalid byte
		}
		r.p.Rune(ru, (*htmlActor)(r))
		i += size
		settle(i)
	}
	if !final && done < len(data) {
		// Roll back to the last point between sequences: the next call
		// reads the rest again.
		b := r.b.String()[:doneLen]
		r.b.Reset()
		r.b.WriteString(b)
		r.st, r.open, r.p, r.cr, r.text = doneSt, doneOpen, textclean.Parser{}, false, r.text[:0]
		if r.open {
			r.b.WriteString("</span>")
		}
		return r.b.String(), done
	}
	if r.cr {
		r.cr = false
		r.text = append(r.text, '\n')
	}
	r.p.Reset() // an incomplete sequence at the very end is dropped
	r.flush()
	if r.open {
		r.b.WriteString("</span>")
	}
	return r.b.String(), len(data)
}

// flush escapes the characters gathered into the HTML.
func (r *renderer) flush() {
	if len(r.text) > 0 {
		r.b.WriteString(html.EscapeString(string(r.text)))
		r.text = r.text[:0]
	}
}

// setSpan closes the open span and opens one for the colour state.
func (r *renderer) setSpan() {
	if r.open {
		r.b.WriteString("</span>")
		r.open = false
	}
	if c := r.st.classes(); c != "" {
		r.b.WriteString(`<span class="` + c + `">`)
		r.open = true
	}
}

// htmlActor is the renderer as the parser's Actor.
type htmlActor renderer

// endCR settles a carriage return: before a line feed it is nothing, before
// anything else it redraws the line, which the page shows as a new line
// rather than lose the earlier text (progress bars).
func (h *htmlActor) endCR(next rune) {
	if h.cr {
		h.cr = false
		if next != '\n' {
			h.text = append(h.text, '\n')
		}
	}
}

func (h *htmlActor) Print(ru rune) {
	h.endCR(ru)
	if textclean.Invisible(ru) { // bidi controls, zero-width characters
		h.text = textclean.AppendRuneEscape(h.text, ru)
		return
	}
	h.text = utf8.AppendRune(h.text, ru) // an invalid byte came as U+FFFD
}

func (h *htmlActor) Execute(c rune) {
	h.endCR(c)
	switch c {
	case '\n', '\t':
		h.text = append(h.text, byte(c))
	case '\r':
		h.cr = true
	default:
		h.text = append(h.text, controlPicture(byte(c))...)
	}
}

func (h *htmlActor) Dispatch(final rune, p textclean.Params) {
	if final != 'm' {
		return
	}
	r := (*renderer)(h)
	r.flush()
	r.st.apply(&p)
	r.setSpan()
}

// controlPicture is the visible symbol for a C0 control character (U+2400
// block).
func controlPicture(c byte) string {
	if c == 0x7f {
		return "\u2421"
	}
	return string(rune(0x2400 + int(c)))
}

// paletteCSS is the stylesheet of the 256 palette classes f0…f255 (text)
// and g0…g255 (background), plus f256/g257 for inverted defaults.
func paletteCSS() string {
	base := []string{
		"#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
		"#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
	}
	col := func(i int) string {
		switch {
		case i < 16:
			return base[i]
		case i < 232:
			i -= 16
			lv := func(v int) int {
				if v == 0 {
					return 0
				}
				return 55 + 40*v
			}
			return "#" + hex2(lv(i/36)) + hex2(lv(i/6%6)) + hex2(lv(i%6))
		default:
			v := 8 + 10*(i-232)
			return "#" + hex2(v) + hex2(v) + hex2(v)
		}
	}
	var b strings.Builder
	for i := range 256 {
		c := col(i)
		b.WriteString(".f" + strconv.Itoa(i) + "{color:" + c + "}.g" + strconv.Itoa(i) + "{background:" + c + "}\n")
	}
	b.WriteString(".f256{color:var(--bg)}.g257{background:var(--fg)}\n")
	return b.String()
}

func hex2(v int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4&15], digits[v&15]})
}

// visible shows the control characters of a name, command or label as
// symbols (C0) or \u escapes (C1, bidirectional overrides), so that what
// a page shows is what is stored, and nothing reorders or hides it.
func visible(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || textclean.Invisible(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(controlPicture(byte(r)))
		case (r >= 0x80 && r < 0xa0) || textclean.Invisible(r):
			b.WriteString("\\u" + strconv.FormatInt(int64(r), 16))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
