// Command jobs runs shell commands as durable background jobs for AI agents
// and people, keeping metadata, every status transition and all output in
// one SQLite database. See internal/cli for the command line.
package main

import (
	"os"

	"github.com/agentjobs/jobs/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
