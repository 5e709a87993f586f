package cli

import (
	"context"
	"runtime/debug"

	"github.com/agentjobs/jobs/internal/mcp"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// runMCP serves the Model Context Protocol on stdio for c's scope, with
// profile's tools, until the client hangs up or ctx ends. Given no scope
// (scoped false: no --scope, no JOBS_SCOPE), a profile whose documents
// isolate conversations serves the client's conversation instead (see
// mcp.RunOwnScope).
func runMCP(ctx context.Context, c *jobs.Client, profile string, scoped bool) error {
	if scoped {
		return mcp.Run(ctx, c, version(), profile)
	}
	return mcp.RunOwnScope(ctx, c, version(), profile)
}

// version is the module version the binary was built from, "(devel)" for
// a build from a working tree.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
