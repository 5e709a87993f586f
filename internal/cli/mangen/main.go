// Command mangen writes jobs(1) in roff on stdout: go run
// ./internal/cli/mangen > docs/jobs.1 (or go generate ./internal/cli).
package main

import (
	"fmt"

	"github.com/agentjobs/jobs/internal/cli"
)

func main() { fmt.Print(cli.ManPage()) }
