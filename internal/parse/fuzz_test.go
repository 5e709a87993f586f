package parse

import (
	"errors"
	"strings"
	"testing"
)

// fuzzErr checks an error from fuzzed input has the promised shape.
func fuzzErr(t *testing.T, err error, what, in string) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s %q: error %v does not match ErrInvalid", what, in, err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "invalid "+what) {
		t.Fatalf("%s %q: bad error message %q", what, in, msg)
	}
}

func FuzzDuration(f *testing.F) {
	for _, s := range []string{"0", "90s", "5m", "1h30m", "-5m", "90", "2d", "87601h", "1.5h", "", "9999999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Duration(s)
		if err != nil {
			fuzzErr(t, err, "duration", s)
			return
		}
		if d < 0 || d > MaxDuration {
			t.Fatalf("Duration(%q) = %v: out of range", s, d)
		}
		// What was accepted reads back the same in Go's own syntax.
		if d != 0 {
			if again, err := Duration(d.String()); err != nil || again != d {
				t.Fatalf("Duration(%q) = %v, but Duration(%q) = %v, %v", s, d, d.String(), again, err)
			}
		}
		if ts := strings.TrimSpace(s); ts != "0" && isDecimal(ts) {
			t.Fatalf("Duration(%q) accepted a bare number", s)
		}
	})
}

func FuzzSize(f *testing.F) {
	for _, s := range []string{"0", "1048576", "500k", "64MiB", "1GB", "1.5G", "-1", "8192P", "1e6", " 1 kb "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Size(s)
		if err != nil {
			fuzzErr(t, err, "size", s)
			return
		}
		if n < 0 {
			t.Fatalf("Size(%q) = %d: negative", s, n)
		}
	})
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{"Enter", "C-c", "C-M-a", "S-Left", "0x1b", "^C", "é", "hello", "C-", "--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateKey(s)
		if err != nil {
			fuzzErr(t, err, "key", s)
			return
		}
		// An accepted key is one key: never empty, never a control
		// character or space-separated text tmux would type.
		if s == "" || strings.ContainsAny(s, "\x00\n\r\t\x1b") {
			t.Fatalf("ValidateKey(%q) accepted", s)
		}
	})
}

func FuzzEnvAssign(f *testing.F) {
	for _, s := range []string{"K=V", "FOO=", "1X=y", "=", "A=b=c", "K=a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := EnvAssign(s)
		if err != nil {
			fuzzErr(t, err, "environment assignment", s)
			return
		}
		if k+"="+v != s || !validEnvName(k) || strings.ContainsRune(v, 0) {
			t.Fatalf("EnvAssign(%q) = %q, %q", s, k, v)
		}
	})
}
