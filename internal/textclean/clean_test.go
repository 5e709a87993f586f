package textclean

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"tab kept", "a\tb\n", "a\tb\n"},
		{"empty", "", ""},

		// Carriage returns.
		{"progress", "10%\r20%\r30%\n", "30%\n"},
		{"crlf", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"trailing cr keeps last state", "10%\r20%\r", "20%"},
		{"cr then shorter text overwrites", "hello world\rbye\n", "byelo world\n"},
		{"cr erase line", "hello world\r\x1b[Kbye\n", "bye\n"},
		{"cr erase whole line", "hello world\x1b[2K\rbye\n", "bye\n"},
		{"spinner", "| working\r/ working\r- working\r\\ working\rdone     \n", "done\n"},

		// Backspace.
		{"backspace overwrite", "ab\bc\n", "ac\n"},
		{"backspace erase", "abc\b \b\n", "ab\n"},
		{"underline overstrike", "_\bh_\bi\n", "hi\n"},
		{"bold overstrike", "h\bhi\bi\n", "hi\n"},
		{"backspace at start", "\b\bx\n", "x\n"},
		{"backspace without rewrite", "abc\b\n", "abc\n"},

		// CSI.
		{"sgr", "\x1b[1;31mred\x1b[0m plain\n", "red plain\n"},
		{"sgr reset short", "\x1b[mx\x1b[m\n", "x\n"},
		{"truecolor", "\x1b[38;2;255;0;0mx\x1b[39m\n", "x\n"},
		{"colon subparams", "\x1b[38:5:196mx\n", "x\n"},
		{"private mode", "\x1b[?25lhidden cursor\x1b[?25h\n", "hidden cursor\n"},
		{"cursor up dropped", "line1\nline2\x1b[1A\x1b[2K\rline2b\n", "line1\nline2b\n"},
		{"cursor position dropped", "\x1b[2J\x1b[H\x1b[5;10Htext\n", "text\n"},
		{"cursor column", "abcdef\x1b[3GX\n", "abXdef\n"},
		{"cursor forward pads", "a\x1b[3Cb\n", "a   b\n"},
		{"cursor back", "abc\x1b[2DX\n", "aXc\n"},
		{"erase chars", "abcdef\x1b[3G\x1b[2X\n", "ab  ef\n"},
		{"delete chars", "abcdef\x1b[3G\x1b[2P\n", "abef\n"},
		{"erase to start", "abcdef\x1b[3G\x1b[1K\n", "   def\n"},
		{"huge forward is bounded", "a\x1b[999999999Cb", "a" + strings.Repeat(" ", maxCol-1) + "b"},
		{"c1 csi", "\u009b31mred\u009b0m\n", "red\n"},

		// OSC and other strings.
		{"osc title bel", "\x1b]0;my title\x07text\n", "text\n"},
		{"osc title st", "\x1b]0;my title\x1b\\text\n", "text\n"},
		{"osc hyperlink", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
		{"osc c1", "\u009d0;title\u009ctext\n", "text\n"},
		{"osc utf8 title", "\x1b]2;héllo ✓\x07ok\n", "ok\n"},
		{"osc ended by newline", "\x1b]0;stray\nnext\n", "\nnext\n"},
		{"dcs", "\x1bPq#0;2;0;0;0#0~~@@\x1b\\after\n", "after\n"},
		{"tmux passthrough", "\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\x\n", "x\n"},
		{"apc", "\x1b_Gf=100;AAAA\x1b\\img\n", "img\n"},
		{"sos pm", "\x1bXsos\x1b\\\x1b^pm\x1b\\t\n", "t\n"},

		// Two-byte sequences.
		{"charset", "\x1b(Bx\x1b)0y\n", "xy\n"},
		{"keypad", "\x1b=\x1b>ok\n", "ok\n"},
		{"save restore", "\x1b7a\x1b8b\n", "ab\n"},
		{"esc nel", "a\x1bEb", "a\nb"},

		// Incomplete at the end.
		{"incomplete csi", "abc\x1b[3", "abc"},
		{"incomplete esc", "abc\x1b", "abc"},
		{"incomplete osc", "abc\x1b]0;tit", "abc"},
		{"incomplete string esc", "abc\x1bPxx\x1b", "abc"},

		// Aborted sequences.
		{"can aborts", "\x1b[31\x18x\n", "x\n"},
		{"esc restarts", "\x1b[31\x1b[32mx\n", "x\n"},
		{"lone esc before text", "\x1bé\n", "é\n"},
		{"csi cut by text", "\x1b[1;é\n", "é\n"},

		// Controls and encoding.
		{"nul bel del", "a\x00b\x07c\x7fd\n", "a\\x00bcd\n"},
		{"other c0", "a\x01\x02\x0b\x0cb\n", "ab\n"},
		{"c1 dropped", "a\u0080\u0099b\n", "ab\n"},
		{"nel c1", "a\u0085b", "a\nb"},
		{"invalid utf8", "a\xffb\xc3\n", "a\uFFFDb\uFFFD\n"},
		{"truncated rune at end", "ok\xe2\x82", "ok\uFFFD\uFFFD"},
		{"utf8 kept", "héllo wörld ✓ 日本\n", "héllo wörld ✓ 日本\n"},
		{"utf8 overwrite", "日本語\rx\n", "x本語\n"},
		{"replacement char kept", "\uFFFD\n", "\uFFFD\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Clean([]byte(tt.in)); got != tt.want {
				t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestCleanerSplits checks that every split of the input into two writes,
// and byte-by-byte writes, clean to what Clean gives for the whole.
func TestCleanerSplits(t *testing.T) {
	inputs := []string{
		"10%\r20%\r30%\n",
		"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n",
		"\x1b[1;31mréd\x1b[0m ✓\n",
		"abc\b \bd\x1b[2Kx\r\n",
		"\u009b31mx\u009d0;t\u009cy",
		"a\xffb\xe2\x82\xacc",
	}
	for _, in := range inputs {
		want := Clean([]byte(in))
		for i := 0; i <= len(in); i++ {
			var c Cleaner
			c.Write([]byte(in[:i]))
			c.Write([]byte(in[i:]))
			if got := c.String(); got != want {
				t.Errorf("split %q at %d: got %q, want %q", in, i, got, want)
			}
		}
		var c Cleaner
		var taken strings.Builder
		for i := 0; i < len(in); i++ {
			c.Write([]byte{in[i]})
			taken.WriteString(c.TakeLines())
		}
		if got := taken.String() + c.String(); got != want {
			t.Errorf("bytewise %q: got %q, want %q", in, got, want)
		}
	}
}

func TestCleanerString(t *testing.T) {
	var c Cleaner
	c.Write([]byte("first\nsecond 10%\rsecond 20%"))
	if got, want := c.String(), "first\nsecond 20%"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	// String is a snapshot: a character cut in half reads as U+FFFD now
	// and as itself once the rest arrives.
	c.Write([]byte("\n\xe2\x9c"))
	if got, want := c.String(), "first\nsecond 20%\n\uFFFD\uFFFD"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	c.Write([]byte("\x93"))
	if got, want := c.String(), "first\nsecond 20%\n✓"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := c.TakeLines(), "first\nsecond 20%\n"; got != want {
		t.Errorf("TakeLines = %q, want %q", got, want)
	}
	if got, want := c.String(), "✓"; got != want {
		t.Errorf("String after TakeLines = %q, want %q", got, want)
	}
	c.Reset()
	if got := c.String(); got != "" {
		t.Errorf("String after Reset = %q, want empty", got)
	}
}

func TestTailChars(t *testing.T) {
	tests := []struct {
		s       string
		n       int
		want    string
		leftOut int
	}{
		{"hello", 3, "llo", 2},
		{"hello", 5, "hello", 0},
		{"hello", 10, "hello", 0},
		{"hello", 0, "", 5},
		{"hello", -1, "", 5},
		{"", 3, "", 0},
		{"日本語テキスト", 3, "キスト", 4},
		{"a✓b", 2, "✓b", 1},
		{"ab\xffc", 2, "\xffc", 2},
	}
	for _, tt := range tests {
		got, left := TailChars(tt.s, tt.n)
		if got != tt.want || left != tt.leftOut {
			t.Errorf("TailChars(%q, %d) = %q, %d; want %q, %d", tt.s, tt.n, got, left, tt.want, tt.leftOut)
		}
	}
}

// checkClean verifies the properties every cleaned text has.
func checkClean(t *testing.T, in []byte, got string) {
	t.Helper()
	if !utf8.ValidString(got) {
		t.Fatalf("Clean(%q) = %q: not valid UTF-8", in, got)
	}
	for _, r := range got {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("Clean(%q) = %q: holds control character %U", in, got, r)
		}
	}
	if again := Clean([]byte(got)); again != got {
		t.Fatalf("Clean not idempotent on %q: %q then %q", in, got, again)
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{
		"10%\r20%\r30%\n",
		"\x1b[1;31mred\x1b[0m\n",
		"\x1b]0;title\x07x",
		"\x1b]8;;u\x1b\\l\x1b]8;;\x1b\\",
		"\x1bPq#0~\x1b\\",
		"_\bh\b\b\bx",
		"\u009b31m\u009d0;t\u009c",
		"a\xffb\xe2\x82",
		"abc\x1b[2G\x1b[K\x1b[5C\x1b[3Dz",
		"\x1b[999999C.",
		"日本\r語",
	} {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		got := Clean(in)
		checkClean(t, in, got)

		i := int(split) % (len(in) + 1)
		var c Cleaner
		c.Write(in[:i])
		first := c.TakeLines()
		c.Write(in[i:])
		if streamed := first + c.String(); streamed != got {
			t.Fatalf("split at %d of %q: streamed %q, Clean %q", i, in, streamed, got)
		}
	})
}

// TestInvisibleShownEscaped: bidirectional controls and zero-width
// characters read as \uNNNN escapes, in cleaned output and in Escape;
// text that merely looks unusual (a non-breaking space, an emoji, RTL
// letters) stays as it is.
func TestInvisibleShownEscaped(t *testing.T) {
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff} {
		in := "a" + string(r) + "b"
		want := fmt.Sprintf(`a\u%04xb`, r)
		if got := Clean([]byte(in)); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if got := Clean([]byte(Clean([]byte(in)))); got != want {
			t.Errorf("Clean is not idempotent on %q: %q", in, got)
		}
	}
	for _, s := range []string{"a\u00a0b", "😀", "שלום", "مرحبا", "\u2028"} {
		if got := Clean([]byte(s)); got != s {
			t.Errorf("Clean(%q) = %q, want it unchanged", s, got)
		}
	}
	// Split across writes, and overwritten by a carriage return.
	var c Cleaner
	c.Write([]byte("x\xe2\x80"))
	c.Write([]byte("\xaey\r"))
	if got, want := c.String(), `x\u202ey`; got != want {
		t.Errorf("split U+202E: %q, want %q", got, want)
	}
}
