package cli

import (
	"slices"
	"strings"

	"github.com/agentjobs/jobs/internal/mcp"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) mcpCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "mcp",
		Usage: "serve the Model Context Protocol on stdio (profile openclaw: tools execute_command, process and kill_process)",
		Description: "Without --scope or JOBS_SCOPE, the openclaw profile isolates conversations as its documents do: it serves the\n" +
			"scope its client names in initialize (params._meta.conversationId), else a new scope of its own\n" +
			"(mcp-<client name>-<random>) for the connection. Set JOBS_SCOPE in the server's configuration to keep one\n" +
			"scope across restarts. The other profiles serve the scope \"default\" unless told otherwise.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "profile", EnvVars: []string{mcp.EnvProfile}, Value: mcp.DefaultProfile,
				Usage: "the agent interface to serve: `NAME` is one of " + strings.Join(mcp.Profiles(), ", ")},
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("mcp", "mcp takes no arguments")
			}
			profile := cc.String("profile")
			if !slices.Contains(mcp.Profiles(), profile) {
				return usagef("mcp", "unknown profile %q (one of %s)", profile, strings.Join(mcp.Profiles(), ", "))
			}
			c, err := r.client(cc)
			if err != nil {
				return err
			}
			return runMCP(cc.Context, c, profile, cc.String("scope") != "")
		},
	}
}

func (r *runner) superviseCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "supervise",
		Usage: "run a supervisor in the foreground (the CLI starts one by itself when needed)",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "idle", Value: "60s", Usage: "exit after `DUR` with no running job, 0 for never"},
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("supervise", "supervise takes no arguments")
			}
			idle, err := parseDuration("supervise", "idle", cc.String("idle"))
			if err != nil {
				return err
			}
			db, err := dbPath(cc)
			if err != nil {
				return err
			}
			if db == "" {
				db, err = defaultDBPath()
				if err != nil {
					return err
				}
			}
			return runSupervisor(cc.Context, db, idle)
		},
	}
}
