package e2e

import "testing"

// TestConformance003MacosShell replays seed document 003's requirements
// (the macOS Shell MCP server's background processes) against `jobs mcp
// --profile macos-shell` through the official TypeScript SDK client.
func TestConformance003MacosShell(t *testing.T) {
	t.Parallel() // a world of its own; waits on node and jobs more than it computes
	w := newWorld(t)
	runConformance(t, w, "003-macos-shell.mjs")
}
