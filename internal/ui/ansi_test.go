package ui

import (
	"html"
	"regexp"
	"strings"
	"testing"
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
