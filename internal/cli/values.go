package cli

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// maxDuration bounds the durations read from the environment, as
// parse.Duration bounds flags.
const maxDuration = parse.MaxDuration

// parseDuration reads a non-negative Go duration ("90s", "5m", "0") given to
// flag of verb.
func parseDuration(verb, flag, s string) (time.Duration, error) {
	d, err := parse.Duration(s)
	if err != nil {
		return 0, usagef(verb, "--%s: %v", flag, err)
	}
	return d, nil
}

// envMillis reads an environment variable holding milliseconds
// (PI_BASH_YIELD_MS, PI_BASH_JOB_TTL_MS). ok is false when it is unset.
func envMillis(verb, name string) (d time.Duration, ok bool, err error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || time.Duration(n)*time.Millisecond > maxDuration {
		return 0, false, usagef(verb, "invalid %s=%s: want milliseconds, such as 10000", name, quoted(v))
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

// envChars reads the first set character-limit variable of names. ok is
// false when none is set.
func envChars(verb string, names ...string) (n int64, ok bool, err error) {
	for _, name := range names {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, false, usagef(verb, "invalid %s=%s: want a positive number of characters", name, quoted(v))
		}
		return n, true, nil
	}
	return 0, false, nil
}

// Environment variables of the original interfaces that set output limits.
var charLimitEnv = []string{"PI_BASH_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS"}

// parseSize reads a byte size ("65536", "64MiB", "1.5G") given to flag.
func parseSize(verb, flag, s string) (int64, error) {
	n, err := parse.Size(s)
	if err != nil {
		return 0, usagef(verb, "--%s: %v", flag, err)
	}
	return n, nil
}

// parseRegexp checks a regular expression given to flag before anything is
// touched.
func parseRegexp(verb, flag, s string) error {
	_, err := regexp.Compile(s)
	if err == nil {
		return nil
	}
	// Go's error quotes the offending part, which may be the whole
	// pattern: say what is wrong and echo that part capped.
	var se *syntax.Error
	if errors.As(err, &se) {
		return usagef(verb, "invalid regular expression for --%s: %s: %s", flag, se.Code, textclean.Echo(se.Expr))
	}
	return usagef(verb, "invalid regular expression for --%s: %s", flag, textclean.Echo(strings.TrimPrefix(err.Error(), "error parsing regexp: ")))
}

// parseSignal normalises a signal name ("int", "SIGINT", "2") to its
// upper-case name without the SIG prefix, by the one signal table
// (vocab.ParseSignal); a signal without a name (a real-time one) stays its
// number.
func parseSignal(verb, s string) (string, error) {
	sig, err := vocab.ParseSignal(s)
	if err != nil {
		return "", usagef(verb, "unknown signal %s: use a name such as INT, HUP, TERM, STOP, CONT, USR1, or a number", quoted(s))
	}
	return strings.TrimPrefix(vocab.SignalName(sig), "SIG"), nil
}

// signalNumber returns the number of a signal name as a job records it
// ("TERM", "SIGTERM", "15"), or 0.
func signalNumber(s string) int {
	sig, err := vocab.ParseSignal(s)
	if err != nil {
		return 0
	}
	return int(sig)
}

// nonNegative checks an integer flag.
func nonNegative(verb, flag string, n int64) error {
	if n < 0 {
		return usagef(verb, "invalid value %d for --%s: must not be negative", n, flag)
	}
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shortDuration writes d as a user types it: "30m", "2s", "1h30m".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
