package e2e

import "testing"

// TestConformance004ClaudeCode holds `jobs mcp --profile claude-code` to
// seed document 004, requirement by requirement, through the official
// TypeScript SDK client (e2e/mcpclient/conformance/004-claude-code.mjs).
func TestConformance004ClaudeCode(t *testing.T) {
	t.Parallel() // a world of its own; waits on node and jobs more than it computes
	if testing.Short() {
		t.Skip("the suite takes about half a minute")
	}
	w := newWorld(t)
	runConformance(t, w, "004-claude-code.mjs")
}
