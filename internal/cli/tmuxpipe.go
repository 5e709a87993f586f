package cli

import (
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentjobs/jobs/internal/tmuxpipe"
	ucli "github.com/urfave/cli/v2"
)

// tmuxPipeCommand is the hidden helper verb that tmux runs, with
// pipe-pane, for every tmux job: it captures the pane's output into the
// database and records the job's end, with or without a supervisor (see
// tmuxpipe.Run). People never type it.
func (r *runner) tmuxPipeCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "tmux-pipe",
		Usage:     "capture a tmux job's pane (run by tmux)",
		ArgsUsage: " ",
		Hidden:    true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "job", Usage: "job `ID`"},
			&ucli.DurationFlag{Name: "grace", Usage: "time between SIGTERM and SIGKILL when the timeout ends the job"},
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("tmux-pipe", "too many arguments: %s", quoted(strings.Join(cc.Args().Slice(), " ")))
			}
			dbPath, job := lastDB(cc), cc.String("job")
			if dbPath == "" || job == "" {
				return usagef("tmux-pipe", "missing --db PATH or --job ID")
			}
			// The helper must outlive whatever hangs up: it alone records
			// the job's end once the supervisor is gone.
			signal.Ignore(syscall.SIGHUP)
			return tmuxpipe.Run(cc.Context, dbPath, job, cc.Duration("grace"), r.stdin)
		},
	}
}

// tmuxExecCommand is the hidden verb a tmux job's pane starts with: it
// takes the job's environment from a file rather than from tmux's command
// line, which every user can read (see tmuxpipe.Exec).
func (r *runner) tmuxExecCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "tmux-exec",
		Usage:     "start a tmux job's command (run by tmux)",
		ArgsUsage: "-- ARGV",
		Hidden:    true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "env-file", Usage: "read the environment from `FILE` and remove it"},
		},
		Action: func(cc *ucli.Context) error {
			file, argv := cc.String("env-file"), cc.Args().Slice()
			if file == "" || len(argv) == 0 {
				return usagef("tmux-exec", "missing --env-file FILE or the command")
			}
			return tmuxpipe.Exec(file, argv)
		},
	}
}
