package e2e

import (
	"strings"
	"testing"
)

// TestListShowsNameAndLabel: a job's --label shows in `jobs list` whether
// or not the job also has a name.
func TestListShowsNameAndLabel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	both := w.start("--name", "web", "--label", "frontend", "--", "true")
	label := w.start("--label", "backend", "--", "true")
	w.ok("wait", both, label)
	out := w.ok("list")
	for _, c := range []struct{ id, want string }{{both, "web (frontend)"}, {label, "backend"}} {
		row := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, c.id) {
				row = l
			}
		}
		if !strings.Contains(row, c.want) {
			t.Errorf("list row of %s does not show %q:\n%s", c.id, c.want, out)
		}
	}
}
