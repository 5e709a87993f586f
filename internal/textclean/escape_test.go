package textclean

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain name", "plain name"},
		{"", ""},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1 \u009b31m \u0085", `c1 \u009b31m \u0085`},
		{"bidi \u202eevil\u202c \u2066x\u2069", `bidi \u202eevil\u202c \u2066x\u2069`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"kept: \\ % _ ' é 日本 \ufffd", "kept: \\ % _ ' é 日本 \ufffd"},
	}
	for _, tt := range tests {
		got := Escape(tt.in)
		if got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := Escape(got); again != got {
			t.Errorf("Escape is not idempotent on %q: %q", got, again)
		}
		for _, r := range got {
			if needsEscape(r) && r != utf8.RuneError {
				t.Errorf("Escape(%q) left %U", tt.in, r)
			}
		}
	}
}

func TestEcho(t *testing.T) {
	if got := Echo("short"); got != "short" {
		t.Errorf("Echo(short) = %q", got)
	}
	exact := strings.Repeat("é", EchoRunes)
	if got := Echo(exact); got != exact {
		t.Errorf("Echo of exactly %d characters was cut: %q", EchoRunes, got)
	}
	long := strings.Repeat("\x1b", 1<<20)
	got := Echo(long)
	if n := utf8.RuneCountInString(got); n != EchoRunes {
		t.Errorf("Echo of 1 MiB is %d characters, want %d", n, EchoRunes)
	}
	if !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, `\x1b\x1b`) || strings.Contains(got, "\x1b") {
		t.Errorf("Echo(1 MiB of ESC) = %q", got)
	}
}
