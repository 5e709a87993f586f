package e2e

import "testing"

// TestConformance002Duragent holds `jobs mcp --profile duragent` to seed
// document 002, requirement by requirement, through the official
// TypeScript SDK client (e2e/mcpclient/conformance/002-duragent.mjs):
// spawn_process and process as the document gives them, its statuses,
// the completion message for wait=false spawns only, the 5 s timeout
// grace, tmux sessions named duragent-<handle> and the fallback to a plain
// process without tmux, the .duragent/processes files, scoping and crash
// recovery. docs/profiles/duragent.md lists the requirements.
func TestConformance002Duragent(t *testing.T) {
	t.Parallel() // a world of its own; waits on node and jobs more than it computes
	if testing.Short() {
		t.Skip("the suite takes about 30 s")
	}
	w := newWorld(t)
	w.scope = "conformance-002"
	runConformance(t, w, "002-duragent.mjs")
}
