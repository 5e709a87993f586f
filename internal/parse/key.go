package parse

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const keyHint = "use a tmux key name like Enter, Escape, C-c, Up, F5 or a single character; send text with --literal"

// keyNames are the key names tmux's send-keys understands (key-string.c),
// lower case because tmux compares them case-insensitively. Mouse and
// User keys are left out: send-keys cannot send them without -M, so
// accepting them would only hide a mistake.
var keyNames = map[string]bool{
	"f1": true, "f2": true, "f3": true, "f4": true, "f5": true, "f6": true,
	"f7": true, "f8": true, "f9": true, "f10": true, "f11": true, "f12": true,
	"ic": true, "insert": true, "dc": true, "delete": true,
	"home": true, "end": true,
	"npage": true, "pagedown": true, "pgdn": true,
	"ppage": true, "pageup": true, "pgup": true,
	"tab": true, "btab": true, "space": true, "bspace": true,
	"enter": true, "escape": true,
	"up": true, "down": true, "left": true, "right": true,
	"kp/": true, "kp*": true, "kp-": true, "kp+": true, "kp.": true,
	"kp0": true, "kp1": true, "kp2": true, "kp3": true, "kp4": true,
	"kp5": true, "kp6": true, "kp7": true, "kp8": true, "kp9": true,
	"kpenter": true,
}

// ctrlKeeps are the characters that stay themselves with a Ctrl modifier
// instead of becoming a control code, as in tmux.
const ctrlKeeps = "!#()+,-.0123456789:;<=>'"

// ValidateKey reports whether s is a key name tmux's send-keys reads as one
// key: a name from its table (Enter, Escape, Tab, BSpace, Space, Up, Down,
// Left, Right, Home, End, PageUp/PPage/PgUp, PageDown/NPage/PgDn,
// Insert/IC, Delete/DC, BTab, F1–F12, KP0–KP9 …; any case), a single
// printable character, or a hexadecimal code like 0x1b, each with
// optional modifiers C-, M-, S- in any order and combination (C-c, M-x,
// S-Left, C-M-a) or a leading ^ for Ctrl (^C).
//
// It follows tmux's own rules because tmux treats a string that is not a
// key name as text to type, so "Entr" would be typed rather than refused.
func ValidateKey(s string) error {
	if s == "" {
		return invalid("key", s, "empty; "+keyHint)
	}
	if !validKey(s) {
		return invalid("key", s, keyHint)
	}
	return nil
}

func validKey(s string) bool {
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		u, err := strconv.ParseUint(rest, 16, 32)
		return err == nil && u <= 0x1fffff
	}
	ctrl := false
	if len(s) > 1 && s[0] == '^' {
		ctrl = true
		s = s[1:]
	}
	for len(s) >= 2 && s[1] == '-' {
		switch s[0] {
		case 'C', 'c':
			ctrl = true
		case 'M', 'm', 'S', 's':
		default:
			return false
		}
		s = s[2:]
	}
	if s == "" {
		return false
	}
	if len(s) == 1 && s[0] < utf8.RuneSelf {
		c := s[0]
		if c < 0x20 || c == 0x7f {
			return false
		}
		// With Ctrl, tmux maps letters, @[\]^_, space and ? to control
		// codes, keeps ctrlKeeps as they are, and refuses the rest.
		if ctrl && !strings.ContainsRune(ctrlKeeps, rune(c)) {
			return c >= 'a' && c <= 'z' || c >= '@' && c <= '_' || c == ' ' || c == '?'
		}
		return true
	}
	if r, size := utf8.DecodeRuneInString(s); size == len(s) && r != utf8.RuneError {
		return r >= 0xa0 // one non-ASCII character, not a C1 control
	}
	return keyNames[strings.ToLower(s)]
}
