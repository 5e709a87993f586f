package cli

import (
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) mcpCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "mcp",
		Usage: "serve the Model Context Protocol on stdio (tools execute_command and process)",
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("mcp", "mcp takes no arguments")
			}
			c, err := r.client(cc)
			if err != nil {
				return err
			}
			return runMCP(cc.Context, c)
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
