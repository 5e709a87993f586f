package e2e

import "testing"

// TestConformance000OpenClawPlan replays seed 000 (OpenClaw's
// implementation plan) against `jobs mcp`: every concrete requirement of
// the document, through the official TypeScript SDK client
// (e2e/mcpclient/conformance/000-openclaw-plan.mjs). The suite's own
// checks run in the world's scope; those of isolation connect without
// one, as two conversations would.
func TestConformance000OpenClawPlan(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.scope = "conformance-000"
	runConformance(t, w, "000-openclaw-plan.mjs")
}

// TestConformance001OpenClawSpec replays seed 001 (OpenClaw's process tool
// specification) against `jobs mcp`, through the official TypeScript SDK
// client (e2e/mcpclient/conformance/001-openclaw-spec.mjs).
func TestConformance001OpenClawSpec(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.scope = "conformance-001"
	runConformance(t, w, "001-openclaw-spec.mjs")
}
