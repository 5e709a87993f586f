package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// runMCP serves MCP on stdio. internal/mcp does not build yet in this
// tree; until it does the verb says so.
func runMCP(ctx context.Context, c *jobs.Client) error {
	return fmt.Errorf("mcp: %w (internal/mcp is not wired in yet)", errUnavailable)
}

// runSupervisor runs a detached supervisor in the foreground until it has
// been idle for idle (0: never) or ctx ends.
func runSupervisor(ctx context.Context, dbPath string, idle time.Duration) error {
	return fmt.Errorf("supervise: %w (internal/runner.RunDetached is not there yet)", errUnavailable)
}

func defaultDBPath() (string, error) { return jobs.DefaultDBPath() }
