package parse

import (
	"regexp"
	"strings"
	"sync"
	"time"
)

// durationSyntax is time.ParseDuration's grammar. Input that matches it
// but does not parse overflowed, which deserves its own message.
var durationSyntax = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[+-]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)
})

// MaxDuration is the longest duration Duration accepts. Nothing a job does
// runs for ten years; a value past it is a typo (a missing unit, an extra
// digit) that would otherwise turn into "no timeout" by accident.
const MaxDuration = 10 * 365 * 24 * time.Hour

const durationHint = "use Go syntax like 90s, 5m, 1h"

// Duration reads a duration in Go syntax ("90s", "5m", "1h30m", "1.5h",
// "250ms"). A bare number is refused, except "0", because "30" could mean
// seconds or minutes and a wrong guess goes unnoticed. Negative durations
// and durations over MaxDuration are refused. Surrounding spaces are
// ignored.
func Duration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	if t == "" {
		return 0, invalid("duration", s, "empty; "+durationHint)
	}
	if isDecimal(t) {
		return 0, invalid("duration", s, "missing unit; "+durationHint)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if strings.HasSuffix(t, "d") && isDecimal(strings.TrimSuffix(t, "d")) {
			return 0, invalid("duration", s, "days are not a unit; use hours like 48h")
		}
		if durationSyntax().MatchString(t) {
			return 0, invalid("duration", s, "too long; at most 10 years")
		}
		return 0, invalid("duration", s, durationHint)
	}
	if d < 0 {
		return 0, invalid("duration", s, "must not be negative")
	}
	if d > MaxDuration {
		return 0, invalid("duration", s, "too long; at most 10 years")
	}
	return d, nil
}

// isDecimal reports whether s is digits with at most one decimal point,
// optionally signed.
func isDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	digits, dots := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}
