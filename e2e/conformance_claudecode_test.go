package e2e

import "testing"

// TestConformance004ClaudeCode holds `jobs mcp --profile claude-code` to
// seed document 004, requirement by requirement, through the official
// TypeScript SDK client (e2e/mcpclient/conformance/004-claude-code.mjs).
func TestConformance004ClaudeCode(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite takes about half a minute")
	}
	w := newWorld(t)
	runConformance(t, w, "004-claude-code.mjs")
}
