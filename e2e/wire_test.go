package e2e

import "testing"

// TestMCPClientWire holds `jobs mcp`'s protocol answers to the
// specification through the TypeScript SDK client: serverInfo.version is a
// version, an unknown logging level is refused (invalid params), a
// subscription to a foreign URI is invalid params and to an unknown job
// -32002, as is a read of either; the poll hint stays short while output
// flows; a cancelled foreground execute_command kills the job it started
// and says so in a log message; and it reports the size of each profile's
// tools/list.
func TestMCPClientWire(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)
	w.scope = "mcp-wire"
	runChecks(t, w, "wire")
}
