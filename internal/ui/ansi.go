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

// apply reads the parameters of one SGR sequence.
func (s *sgr) apply(params string) {
	if params == "" {
		*s = newSGR()
		return
	}
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	n := func(i int) int {
		if i >= len(ps) {
			return -1
		}
		v, err := strconv.Atoi(ps[i])
		if err != nil {
			return -1
		}
		return v
	}
	for i := 0; i < len(ps); i++ {
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
// markup. It keeps the colour state between calls, for a stream.
type renderer struct {
	st sgr
}

func newRenderer() *renderer { return &renderer{st: newSGR()} }

// render converts data and returns the HTML and how many bytes of data it
// consumed. Unless final, an escape sequence or UTF-8 character cut at the
// end is left unconsumed for the next call.
func (r *renderer) render(data []byte, final bool) (string, int) {
	var b strings.Builder
	open := false
	setSpan := func() {
		if open {
			b.WriteString("</span>")
			open = false
		}
		if c := r.st.classes(); c != "" {
			b.WriteString(`<span class="` + c + `">`)
			open = true
		}
	}
	setSpan()
	var text []byte
	flush := func() {
		if len(text) > 0 {
			b.WriteString(html.EscapeString(string(text)))
			text = text[:0]
		}
	}
	i := 0
	for i < len(data) {
		c := data[i]
		switch {
		case c == 0x1b:
			n, params, final2, ok := escape(data[i:])
			if !ok {
				if !final {
					flush()
					if open {
						b.WriteString("</span>")
					}
					return b.String(), i
				}
				n = len(data) - i
			}
			if final2 == 'm' {
				flush()
				r.st.apply(params)
				setSpan()
			}
			i += n
			continue
		case c == '\n' || c == '\t':
			text = append(text, c)
		case c == '\r':
			// A lone carriage return redraws a line (progress bars):
			// show the redraws as lines rather than lose them.
			if i+1 < len(data) && data[i+1] == '\n' {
				break
			}
			if i+1 == len(data) && !final {
				flush()
				if open {
					b.WriteString("</span>")
				}
				return b.String(), i
			}
			text = append(text, '\n')
		case c < 0x20 || c == 0x7f:
			text = append(text, controlPicture(c)...)
		case c < 0x80:
			text = append(text, c)
		default:
			ru, size := utf8.DecodeRune(data[i:])
			if ru == utf8.RuneError && size <= 1 {
				if !final && !utf8.FullRune(data[i:]) {
					flush()
					if open {
						b.WriteString("</span>")
					}
					return b.String(), i
				}
				text = append(text, "\uFFFD"...)
				i++
				continue
			}
			switch {
			case ru >= 0x80 && ru < 0xa0, // C1 controls
				textclean.Invisible(ru): // bidi controls, zero-width characters
				text = append(text, []byte("\\u"+strconv.FormatInt(int64(ru), 16))...)
			default:
				text = append(text, data[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	flush()
	if open {
		b.WriteString("</span>")
	}
	return b.String(), len(data)
}

// controlPicture is the visible symbol for a C0 control character (U+2400
// block).
func controlPicture(c byte) string {
	if c == 0x7f {
		return "\u2421"
	}
	return string(rune(0x2400 + int(c)))
}

// escape measures the escape sequence at the start of b (b[0] is ESC). It
// returns its length, the parameters and final byte of a CSI sequence, and
// ok=false when b ends before the sequence does.
func escape(b []byte) (n int, params string, final byte, ok bool) {
	if len(b) < 2 {
		return 0, "", 0, false
	}
	switch b[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		for i := 2; i < len(b); i++ {
			if b[i] >= 0x40 && b[i] <= 0x7e {
				return i + 1, string(b[2:i]), b[i], true
			}
			if i-2 > 64 { // not a sequence any terminal sends: drop the ESC [
				return 2, "", 0, true
			}
		}
		return 0, "", 0, false
	case ']', 'P', '_', '^', 'X': // strings ended by BEL or ESC \
		for i := 2; i < len(b); i++ {
			if b[i] == 0x07 {
				return i + 1, "", 0, true
			}
			if b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\' {
				return i + 2, "", 0, true
			}
			if i > 4096 {
				return i, "", 0, true
			}
		}
		return 0, "", 0, false
	case '(', ')', '*', '+', '#', '%': // one more byte
		if len(b) < 3 {
			return 0, "", 0, false
		}
		return 3, "", 0, true
	}
	return 2, "", 0, true
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
