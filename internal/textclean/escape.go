package textclean

import (
	"strings"
	"unicode/utf8"
)

// EchoRunes is how many characters of user input Echo keeps.
const EchoRunes = 64

// Escape returns s with every character a terminal would act on, rather
// than show, written as a visible escape, so that names, labels, commands
// and scopes shown to a person cannot clear the screen, set the window
// title, write the clipboard (OSC 52) or reorder the line:
//
//   - tab, newline and carriage return become \t, \n and \r;
//   - other C0 controls and DEL become \xNN (ESC is \x1b);
//   - C1 controls (U+0080–U+009F) become \uNNNN (\u009b);
//   - the bidirectional controls and the zero-width characters (see
//     Invisible) become \uNNNN (\u202e, \u200b);
//   - each byte of invalid UTF-8 becomes \xNN (\xff).
//
// Everything else, the backslash included, is left as it is: the result is
// for reading, and --json gives the exact text. Escape(Escape(s)) ==
// Escape(s).
func Escape(s string) string {
	i := strings.IndexFunc(s, needsEscape)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			writeByteEscape(&b, s[i])
			i += size
			continue
		}
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			writeByteEscape(&b, byte(r))
		case isC1(r) || Invisible(r):
			writeRuneEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Echo is Escape of s cut to EchoRunes characters, ending in "…" when cut:
// the form in which an error message repeats what the user gave, so that a
// megabyte of id or pattern comes back as one short line.
func Echo(s string) string {
	return Cap(Escape(s), EchoRunes)
}

// Cap cuts s to at most n characters, the last being "…" when it was cut.
func Cap(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n-1 {
			if utf8.RuneCountInString(s[i:]) <= 1 {
				return s
			}
			return s[:i] + "…"
		}
		count++
	}
	return s
}

func needsEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || isC1(r) || Invisible(r) || r == utf8.RuneError
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// Invisible reports whether r is a character a terminal does not show
// although it changes what is read: a bidirectional control (the embeddings
// and overrides U+202A–U+202E, the isolates U+2066–U+2069, the marks
// U+200E, U+200F and U+061C), which reorders the text around it, or a
// zero-width character (U+200B–U+200D, U+2060, U+FEFF), which hides a
// difference between two strings that look the same. Every text shown to
// a person or an agent writes it as a \uNNNN escape, a byte-order mark at
// the start of output and a joiner inside an emoji sequence included: the
// exact bytes are in the raw log and in --json.
func Invisible(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff:
		return true
	}
	return false
}

// AppendRuneEscape appends r as \uNNNN, the form Escape and Clean show an
// invisible or C1 character in.
func AppendRuneEscape(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '\\', 'u')
	for shift := 12; shift >= 0; shift -= 4 {
		b = append(b, hex[(r>>shift)&0xf])
	}
	return b
}

func writeRuneEscape(b *strings.Builder, r rune) {
	var buf [6]byte
	b.Write(AppendRuneEscape(buf[:0], r))
}

func writeByteEscape(b *strings.Builder, c byte) {
	const hex = "0123456789abcdef"
	b.WriteString(`\x`)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// ShellQuote quotes s as one word for a POSIX shell: as it is when it has
// only characters no shell treats specially, else in single quotes. It is
// how jobs shows an argv as a command line and how it builds one from
// separate arguments.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes each of argv with ShellQuote and joins them with
// spaces: the command line a shell would need to run argv.
func ShellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = ShellQuote(a)
	}
	return strings.Join(parts, " ")
}
