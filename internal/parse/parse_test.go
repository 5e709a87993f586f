package parse

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// checkErr verifies the shape every error of this package has: one line,
// lower case, quoting the input, matching ErrInvalid.
func checkErr(t *testing.T, err error, what, in string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s %q: no error", what, in)
	}
	msg := err.Error()
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%s %q: error %q does not match ErrInvalid", what, in, msg)
	}
	if prefix := "invalid " + what + " "; !strings.HasPrefix(msg, prefix) {
		t.Errorf("%s %q: error %q does not start with %q", what, in, msg, prefix)
	}
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("%s %q: error %q is not one line", what, in, msg)
	}
}

func TestDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{" 0 ", 0},
		{"0s", 0},
		{"90s", 90 * time.Second},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"+5m", 5 * time.Minute},
		{" 2m ", 2 * time.Minute},
		{"87600h", MaxDuration},
	}
	for _, tt := range good {
		got, err := Duration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Duration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}

	bad := []struct{ in, msg string }{
		{"", `invalid duration "": empty; use Go syntax like 90s, 5m, 1h`},
		{"5x", `invalid duration "5x": use Go syntax like 90s, 5m, 1h`},
		{"90", `invalid duration "90": missing unit; use Go syntax like 90s, 5m, 1h`},
		{"1.5", `invalid duration "1.5": missing unit; use Go syntax like 90s, 5m, 1h`},
		{"-5m", `invalid duration "-5m": must not be negative`},
		{"-1ns", `invalid duration "-1ns": must not be negative`},
		{"2d", `invalid duration "2d": days are not a unit; use hours like 48h`},
		{"87601h", `invalid duration "87601h": too long; at most 10 years`},
		{"9999999999h", `invalid duration "9999999999h": too long; at most 10 years`},
		{"5 m", `invalid duration "5 m": use Go syntax like 90s, 5m, 1h`},
		{"m", `invalid duration "m": use Go syntax like 90s, 5m, 1h`},
	}
	for _, tt := range bad {
		_, err := Duration(tt.in)
		checkErr(t, err, "duration", tt.in)
		if err != nil && err.Error() != tt.msg {
			t.Errorf("Duration(%q) error = %q, want %q", tt.in, err, tt.msg)
		}
	}
}

func TestSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"100b", 100},
		{"500k", 500 << 10},
		{"500K", 500 << 10},
		{"500KiB", 500 << 10},
		{"500kB", 500_000},
		{"64MiB", 64 << 20},
		{"64M", 64 << 20},
		{"64 MiB", 64 << 20},
		{"64mib", 64 << 20},
		{"1GB", 1_000_000_000},
		{"1.1GB", 1_100_000_000},
		{"1.5G", 3 << 29},
		{"0.5k", 512},
		{"1.0001k", 1024}, // rounded down to whole bytes
		{"2Ti", 2 << 40},
		{"1PB", 1e15},
		{"8191P", 8191 << 50},
		{"9223372036854775807", 1<<63 - 1},
		{" 1k ", 1024},
	}
	for _, tt := range good {
		got, err := Size(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Size(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}

	bad := []struct{ in, msg string }{
		{"", `invalid size "": empty; use bytes or a unit like 500k, 64MiB, 1GB`},
		{"-1", `invalid size "-1": must not be negative`},
		{"-1k", `invalid size "-1k": must not be negative`},
		{"5x", `invalid size "5x": unknown unit "x"; use bytes or a unit like 500k, 64MiB, 1GB`},
		{"k", `invalid size "k": use bytes or a unit like 500k, 64MiB, 1GB`},
		{"1..5k", `invalid size "1..5k": use bytes or a unit like 500k, 64MiB, 1GB`},
		{".", `invalid size ".": use bytes or a unit like 500k, 64MiB, 1GB`},
		{"8192P", `invalid size "8192P": too large`},
		{"9223372036854775808", `invalid size "9223372036854775808": too large`},
		{"1e6", `invalid size "1e6": unknown unit "e6"; use bytes or a unit like 500k, 64MiB, 1GB`},
		{"0x10", `invalid size "0x10": unknown unit "x10"; use bytes or a unit like 500k, 64MiB, 1GB`},
		{"5\x01", `invalid size "5\x01": unknown unit "\x01"; use bytes or a unit like 500k, 64MiB, 1GB`},
	}
	for _, tt := range bad {
		_, err := Size(tt.in)
		checkErr(t, err, "size", tt.in)
		if err != nil && err.Error() != tt.msg {
			t.Errorf("Size(%q) error = %q, want %q", tt.in, err, tt.msg)
		}
	}
}

func TestEnvAssign(t *testing.T) {
	good := []struct{ in, k, v string }{
		{"K=V", "K", "V"},
		{"FOO=", "FOO", ""},
		{"_x1=a=b=c", "_x1", "a=b=c"},
		{"lower_case=with space", "lower_case", "with space"},
		{"PATH=/usr/bin:/bin", "PATH", "/usr/bin:/bin"},
		{"U=ünïcode\nnewline", "U", "ünïcode\nnewline"},
	}
	for _, tt := range good {
		k, v, err := EnvAssign(tt.in)
		if err != nil || k != tt.k || v != tt.v {
			t.Errorf("EnvAssign(%q) = %q, %q, %v; want %q, %q", tt.in, k, v, err, tt.k, tt.v)
		}
	}

	bad := []struct{ in, msg string }{
		{"FOO", `invalid environment assignment "FOO": use NAME=value`},
		{"", `invalid environment assignment "": use NAME=value`},
		{"=V", `invalid environment assignment "=V": the name must be letters, digits and _, not starting with a digit`},
		{"1X=y", `invalid environment assignment "1X=y": the name must be letters, digits and _, not starting with a digit`},
		{"A-B=y", `invalid environment assignment "A-B=y": the name must be letters, digits and _, not starting with a digit`},
		{"A B=y", `invalid environment assignment "A B=y": the name must be letters, digits and _, not starting with a digit`},
		{"É=y", `invalid environment assignment "É=y": the name must be letters, digits and _, not starting with a digit`},
		{"K=a\x00b", `invalid environment assignment "K=a\x00b": the value holds a NUL byte`},
	}
	for _, tt := range bad {
		_, _, err := EnvAssign(tt.in)
		checkErr(t, err, "environment assignment", tt.in)
		if err != nil && err.Error() != tt.msg {
			t.Errorf("EnvAssign(%q) error = %q, want %q", tt.in, err, tt.msg)
		}
	}
}

func TestValidateKey(t *testing.T) {
	good := []string{
		"Enter", "enter", "ENTER", "Escape", "Tab", "BTab", "BSpace", "Space",
		"Up", "Down", "Left", "Right", "Home", "End",
		"PageUp", "PPage", "PgUp", "PageDown", "NPage", "PgDn",
		"Insert", "IC", "Delete", "DC",
		"F1", "F5", "F12", "KP0", "KPEnter", "KP*",
		"C-c", "C-C", "c-c", "C-x", "M-x", "S-Left", "C-M-a", "M-C-a", "C-S-Up",
		"C-Space", "C-@", "C-[", "C-?", "C-1", "C--", "^C", "^c", "^[",
		"a", "Z", "0", "-", "^", " ", "~", "é", "日", "✓",
		"0x1b", "0x0D", "0x1fffff",
	}
	for _, s := range good {
		if err := ValidateKey(s); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", s, err)
		}
	}

	bad := []string{
		"", "Entr", "hello", "echo hi", "C-", "M-", "C-M-", "X-a", "--",
		"C-~", "C-{", "\t", "\n", "\x1b", "\x7f", "\u0085", "F13", "F0",
		"None", "Any", "MouseDown1", "User0", "0x", "0xzz", "0x200000",
		"ab", "日本", "\xff", "C-\xff",
	}
	for _, s := range bad {
		err := ValidateKey(s)
		checkErr(t, err, "key", s)
	}
	if got, want := ValidateKey("Entr").Error(), `invalid key "Entr": use a tmux key name like Enter, Escape, C-c, Up, F5 or a single character; send text with --literal`; got != want {
		t.Errorf("ValidateKey error = %q, want %q", got, want)
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1, "1 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1229, "1.2 KiB"},
		{64 << 20, "64 MiB"}, {1288490189, "1.2 GiB"}, {500 << 20, "500 MiB"},
	} {
		if got := FormatSize(tc.n); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
