package cli

import (
	"context"
	"fmt"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// runMCP serves MCP on stdio. internal/mcp does not build yet in this
// tree; until it does the verb says so.
func runMCP(ctx context.Context, c *jobs.Client) error {
	return fmt.Errorf("mcp: %w (internal/mcp is not wired in yet)", errUnavailable)
}
