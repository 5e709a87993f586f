package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// maxErrorRunes bounds the error line printed on stderr.
const maxErrorRunes = 400

// usageError is a malformed command line: exit status 2. Verb names the
// command whose help the hint points to ("" for the top level).
type usageError struct {
	msg  string
	verb string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error for verb.
func usagef(verb, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), verb: verb}
}

// exitError ends the command with a status and, when msg is not empty, one
// line on stderr. It carries a job's own exit status out of wait.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// errorLine renders err as the single line printed on stderr and picks the
// exit status.
func errorLine(err error) (line string, code int) {
	var ue *usageError
	var ee *exitError
	hint := ""
	code = ExitError
	switch {
	case errors.As(err, &ue):
		code = ExitUsage
		if ue.verb != "" {
			hint = fmt.Sprintf("run 'jobs help %s'", ue.verb)
		} else {
			hint = "run 'jobs help'"
		}
	case errors.As(err, &ee):
		if ee.msg == "" {
			return "", ee.code
		}
		code = ee.code
	case errors.Is(err, context.Canceled):
		return "jobs: interrupted", ExitInterrupted
	case errors.Is(err, jobs.ErrInvalid):
		code = ExitUsage
	}
	// A damaged or replaced database is said in the same words whichever
	// verb met it: the path and the cause, without the verbs on the way.
	var corrupt *jobs.CorruptError
	var replaced *jobs.ReplacedError
	switch {
	case errors.As(err, &corrupt):
		return "jobs: " + oneLine(corrupt.Error()), code
	case errors.As(err, &replaced):
		return "jobs: " + oneLine(replaced.Error()), code
	}
	if hint == "" {
		hint = defaultHint(err)
	}
	// Errors repeat what the user gave (an id, a pattern, a flag): escaped
	// so that it cannot drive the terminal, and bounded as a whole, beyond
	// the echo of each part (textclean.Echo), so it stays one short line.
	msg := textclean.Cap(shown(oneLine(err.Error())), maxErrorRunes)
	if hint != "" && !strings.Contains(msg, hint) {
		msg += " (" + hint + ")"
	}
	return "jobs: " + msg, code
}

// defaultHint suggests the next step for the errors people hit most.
func defaultHint(err error) string {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return "'jobs list' shows this scope's jobs"
	case errors.Is(err, jobs.ErrAmbiguous):
		return "use more characters of the id"
	case errors.Is(err, jobs.ErrNameTaken):
		return "use --replace to end it and start again"
	case errors.Is(err, jobs.ErrLimit):
		return "'jobs kill' or 'jobs wait' some running jobs first"
	case errors.Is(err, jobs.ErrNoTmux):
		return "install tmux"
	}
	return ""
}

// The regexps of this file are compiled on first use, not at every start
// of the binary: compiled in package init they were about 2% of the CPU
// time of a `jobs start` (perf), and most runs never print an error.
var spaces = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s*\n\s*`) })

// quoted is how an error repeats a word the user gave: in double quotes,
// escaped and cut to textclean.EchoRunes characters.
func quoted(s string) string { return `"` + textclean.Echo(s) + `"` }

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "\n") {
		return s
	}
	return spaces().ReplaceAllString(s, "; ")
}

type flagErrorPattern struct {
	re     *regexp.Regexp
	format func(captures []string) string
}

// flagErrorPatterns rewrite the errors of Go's flag package into the
// tool's own words.
var flagErrorPatterns = sync.OnceValue(func() []flagErrorPattern {
	return []flagErrorPattern{
		{regexp.MustCompile(`^flag provided but not defined: -+((?s:.*))$`), func(c []string) string { return "unknown flag --" + c[0] }},
		{regexp.MustCompile(`^flag needs an argument: -+((?s:.*))$`), func(c []string) string { return "flag --" + c[0] + " needs a value" }},
		{regexp.MustCompile(`^invalid (?:boolean )?value "((?s:.*))" for flag -+([^:]*):(?s:.*)$`), func(c []string) string { return `invalid value "` + c[0] + `" for --` + c[1] }},
		{regexp.MustCompile(`^invalid boolean flag -+([^:]*):(?s:.*)$`), func(c []string) string { return "invalid value for --" + c[0] }},
	}
})

// rewriteFlagError turns a flag parsing error into a usage error for verb;
// an unknown flag close to one of flags is followed by the suggestion.
func rewriteFlagError(verb string, err error, flags []string) error {
	msg := err.Error()
	suggest := ""
	if m := flagErrorPatterns()[0].re.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		suggest = didYouMean(name, flags, "--")
	}
	for _, p := range flagErrorPatterns() {
		if m := p.re.FindStringSubmatchIndex(msg); m != nil {
			// The captures are what the user typed: echo them capped.
			var parts []string
			for i := 2; i+1 < len(m); i += 2 {
				parts = append(parts, textclean.Echo(msg[m[i]:m[i+1]]))
			}
			msg = p.format(parts)
			break
		}
	}
	// Single-letter flags are spelt with one dash.
	msg = regexp.MustCompile(`--([a-zA-Z])\b([^-]|$)`).ReplaceAllString(msg, "-$1$2")
	return &usageError{msg: msg + suggest, verb: verb}
}
