package parse

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// keySeqs are the bytes an xterm-like terminal sends for the named keys,
// by the lower-case names keyNames holds. A pty job has no tmux to turn a
// key name into bytes, so the supervisor writes these to its terminal.
var keySeqs = map[string]string{
	"enter": "\r", "kpenter": "\r", "tab": "\t", "btab": "\x1b[Z",
	"space": " ", "bspace": "\x7f", "escape": "\x1b",
	"up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
	"home": "\x1b[H", "end": "\x1b[F",
	"ic": "\x1b[2~", "insert": "\x1b[2~", "dc": "\x1b[3~", "delete": "\x1b[3~",
	"ppage": "\x1b[5~", "pageup": "\x1b[5~", "pgup": "\x1b[5~",
	"npage": "\x1b[6~", "pagedown": "\x1b[6~", "pgdn": "\x1b[6~",
	"f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR", "f4": "\x1bOS",
	"f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
	"f9": "\x1b[20~", "f10": "\x1b[21~", "f11": "\x1b[23~", "f12": "\x1b[24~",
	"kp/": "/", "kp*": "*", "kp-": "-", "kp+": "+", "kp.": ".",
	"kp0": "0", "kp1": "1", "kp2": "2", "kp3": "3", "kp4": "4",
	"kp5": "5", "kp6": "6", "kp7": "7", "kp8": "8", "kp9": "9",
}

// KeyBytes returns the bytes a terminal sends for key, a key name as
// ValidateKey accepts it: a named key, a character, a 0x code, each with
// optional C- (control code), M- (ESC prefix) and S- modifiers. Shift
// changes only letters; modified named keys are sent unmodified, which
// programs reading a plain terminal mostly cannot tell apart anyway.
func KeyBytes(key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(key, "0x"); ok {
		u, _ := strconv.ParseUint(rest, 16, 32) // validated
		if u < utf8.RuneSelf {
			return []byte{byte(u)}, nil
		}
		return utf8.AppendRune(nil, rune(u)), nil
	}
	s := key
	ctrl, meta, shift := false, false, false
	if len(s) > 1 && s[0] == '^' {
		ctrl, s = true, s[1:]
	}
	for len(s) >= 2 && s[1] == '-' {
		switch s[0] {
		case 'C', 'c':
			ctrl = true
		case 'M', 'm':
			meta = true
		case 'S', 's':
			shift = true
		}
		s = s[2:]
	}
	var out []byte
	if meta {
		out = append(out, 0x1b)
	}
	if len(s) == 1 {
		c := s[0]
		switch {
		case ctrl && c == '?':
			c = 0x7f
		case ctrl && c == ' ':
			c = 0
		case ctrl && c >= 'a' && c <= 'z':
			c -= 'a' - 1
		case ctrl && c >= '@' && c <= '_':
			c -= '@'
		case shift && c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		return append(out, c), nil
	}
	if ctrl && strings.EqualFold(s, "space") {
		return append(out, 0), nil
	}
	if seq, ok := keySeqs[strings.ToLower(s)]; ok {
		return append(out, seq...), nil
	}
	return append(out, s...), nil // one non-ASCII character
}

// KeysBytes is what a terminal receives for send-keys' arguments, by
// tmux's rule: an argument that is a key name is pressed (KeyBytes), any
// other is typed as it is; with literal every argument is typed.
func KeysBytes(keys []string, literal bool) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		if literal || (k != "" && ValidateKey(k) != nil) {
			out = append(out, k...)
			continue
		}
		b, err := KeyBytes(k)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}
