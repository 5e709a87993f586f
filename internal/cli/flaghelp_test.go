package cli

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestFlagHelpShowsRealDefaults: every verb's --help shows a flag's real
// default or none: never the zero value a flag holds when not given
// ("(default: 0)" for a limit that is really 500 characters), never two.
func TestFlagHelpShowsRealDefaults(t *testing.T) {
	r := &runner{stdin: strings.NewReader("")}
	zero := regexp.MustCompile(`\(default: (0|""|0s)\)`)
	want := map[string][]string{
		"poll":  {"--tail N", fmt.Sprintf("(default %d", jobs.DefaultTailChars)},
		"log":   {"--limit SIZE", "(default " + parse.FormatSize(jobs.DefaultPageBytes), "--lines N", fmt.Sprintf("(default %d)", jobs.DefaultLogLines)},
		"list":  {"--limit N", fmt.Sprintf("(default %d on a terminal, %d otherwise)", listTerminalRows, listPipedRows)},
		"start": {"--max-output SIZE", "(default " + parse.FormatSize(jobs.DefaultMaxOutput) + ")", "--timeout DUR", "(default 30m)"},
		"kill":  {"--grace DUR", "(default 2s)"},
	}
	for _, c := range r.app().Commands {
		if c.Hidden {
			continue
		}
		var out bytes.Buffer
		r.stdout, r.stderr = &out, &out
		if err := r.app().RunContext(context.Background(), []string{"jobs", c.Name, "--help"}); err != nil {
			t.Fatalf("%s --help: %v", c.Name, err)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "-") {
				continue
			}
			if zero.MatchString(line) {
				t.Errorf("%s: a zero shown as the default: %s", c.Name, strings.TrimSpace(line))
			}
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s: two defaults: %s", c.Name, strings.TrimSpace(line))
			}
		}
		w := want[c.Name]
		for i := 0; i < len(w); i += 2 {
			found := false
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.Contains(line, " "+w[i]+" ") && strings.Contains(line, w[i+1]) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s --help: no line for %s saying %q:\n%s", c.Name, w[i], w[i+1], out.String())
			}
		}
	}
}
