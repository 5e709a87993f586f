package ui

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/textclean"
)

func TestRender(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain", "hello\n", "hello\n"},
		{"markup is text", `<script>alert("x")</script>&`, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;"},
		{"colour", "\x1b[31mred\x1b[0m plain", `<span class="f1">red</span> plain`},
		{"bold bright", "\x1b[1;92mok\x1b[m", `<span class="f10 b">ok</span>`},
		{"256 and truecolour", "\x1b[38;5;208ma\x1b[48;2;255;0;0mb", `<span class="f208">a</span><span class="f208 g196">b</span>`},
		{"title and clear dropped", "\x1b]0;pwned\x07\x1b[2Jafter", "after"},
		{"controls visible", "a\x07b\x00c", "a\u2407b\u2400c"},
		{"bidi override escaped", "x\u202ey", `x\u202ey`},
		{"carriage return redraw", "10%\r50%\r\n", "10%\n50%\n"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
	}
	for _, c := range cases {
		got, n := newRenderer().render([]byte(c.in), true)
		if got != c.want || n != len(c.in) {
			t.Errorf("%s: render(%q) = %q, %d; want %q, %d", c.name, c.in, got, n, c.want, len(c.in))
		}
	}
}

// TestRenderHoldsBackCutSequences: a stream cut inside an escape sequence
// or a UTF-8 character leaves it for the next piece.
func TestRenderHoldsBackCutSequences(t *testing.T) {
	for _, in := range []string{"ab\x1b[3", "ab\x1b", "ab\x1b]0;ti", "ab\xe2\x82", "ab\r"} {
		got, n := newRenderer().render([]byte(in), false)
		if n != 2 || got != "ab" {
			t.Errorf("render(%q, not final) = %q, %d; want \"ab\", 2", in, got, n)
		}
	}
}

var tag = regexp.MustCompile(`<span class="[a-z0-9 ]*">|</span>`)

// text is what a browser would show of rendered HTML.
func text(h string) string { return html.UnescapeString(tag.ReplaceAllString(h, "")) }

// FuzzRender: whatever the bytes, the HTML holds no markup but the
// renderer's own spans, and rendering a stream in two pieces shows the same
// text as rendering it whole.
func FuzzRender(f *testing.F) {
	f.Add([]byte("\x1b[31mred\x1b[0m <b>x</b>\r\n"), 3)
	f.Add([]byte("\x1b]0;t\x07\x1b[2J\xe2\x82\xac\x1b[38;2;1;2;3m"), 5)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		whole, n := newRenderer().render(data, true)
		if n != len(data) {
			t.Fatalf("final render consumed %d of %d bytes", n, len(data))
		}
		if rest := tag.ReplaceAllString(whole, ""); strings.ContainsAny(rest, "<>") {
			t.Fatalf("markup in %q", whole)
		}
		if len(data) == 0 {
			return
		}
		cut = ((cut % len(data)) + len(data)) % len(data)
		r := newRenderer()
		first, used := r.render(data[:cut], false)
		second, _ := r.render(data[used:], true)
		if got, want := text(first+second), text(whole); got != want {
			t.Fatalf("in two pieces at %d: %q, whole: %q", cut, got, want)
		}
	})
}

// edits records whether a parse met anything the agents' cleaning and the
// web view act on differently by design: line editing (carriage return,
// backspace, the erase and cursor sequences) and controls the page shows
// as symbols but cleaning drops.
type edits struct{ found bool }

func (e *edits) Print(rune) {}
func (e *edits) Execute(c rune) {
	if c != '\n' && c != '\t' {
		e.found = true
	}
}
func (e *edits) Dispatch(final rune, _ textclean.Params) {
	if strings.ContainsRune("KG`CaDXP", final) {
		e.found = true
	}
}

// FuzzRenderAgreesWithClean: the web view and the text agents read come
// from one reading of escape sequences (textclean's Parser), so wherever
// neither edits the line, what the page shows is exactly the cleaned text:
// no sequence ends in a different place for one of them.
func FuzzRenderAgreesWithClean(f *testing.F) {
	f.Add([]byte("\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[2J\x1b[?25lok\n"))
	f.Add([]byte("\xc2\x9b31mc1 csi\xc2\x9d0;title\xc2\x9c tail \xff\xfe\u202e\n"))
	f.Add([]byte("\x1b(B\x1b=\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18m many\x1b[\x18cancelled\x1bPdcs\x1b\\after"))
	f.Add([]byte("\x1b]unterminated osc\nnext line\n\x1b[38:2::1:2:3mcolon"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e edits
		var p textclean.Parser
		for _, r := range string(data) {
			p.Rune(r, &e)
		}
		if e.found {
			return
		}
		html, _ := newRenderer().render(data, true)
		if got, want := text(html), textclean.Clean(data); got != want {
			t.Fatalf("render(%q) shows %q, Clean gives %q", data, got, want)
		}
	})
}
