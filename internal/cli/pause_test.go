package cli

import (
	"regexp"
	"testing"
)

func TestPauseResumeUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := e.ok("help")
	for _, verb := range []string{"pause", "resume"} {
		if !regexp.MustCompile(`(?m)^\s+` + verb + `\s`).MatchString(out) {
			t.Errorf("jobs help does not list %s", verb)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause"}, "missing job id"},
		{[]string{"resume"}, "missing job id"},
		{[]string{"pause", "abcd", "efgh"}, "one job at a time"},
		{[]string{"resume", ""}, "empty job id"},
	} {
		r := e.run2(tc.args...)
		checkError(t, r, ExitUsage, tc.want)
	}
	r := e.run2("pause", "abcd")
	checkError(t, r, ExitError, "job abcd not found")
}
