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

// Version is the version a build from source states, set with
//
//	go build -ldflags "-X github.com/agentjobs/jobs/internal/cli.Version=$(git describe --tags --always --dirty)"
//
// Empty means the module version `go install module@version` records, or
// a development version named by the commit when the build recorded one.
var Version string

// devVersion is the version of a build that states none: a semantic
// version's pre-release, which MCP clients and people read as what it is.
const devVersion = "0.0.0-devel"

// version is the version the binary states (--version, MCP serverInfo).
func version() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return devVersion
	}
	return versionOf(bi)
}

// versionOf is the version build info bi states: its module version when
// it has one ("(devel)" is none), else devVersion with the commit and
// whether the tree had changes, as far as the build recorded them.
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return devVersion
	}
	v := devVersion + "+" + rev[:min(len(rev), 12)]
	if dirty {
		v += ".dirty"
	}
	return v
}
