package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// Main runs the jobs command with the process's arguments and standard
// streams and returns the exit status.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
}

// Run runs the jobs command line args (args[0] is the program name) and
// returns the exit status. Errors are printed on stderr as one line.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	r := &runner{stdin: stdin, stdout: stdout, stderr: stderr}
	defer r.close()
	app := r.app()
	if len(args) > 1 && args[1] == completeVerb {
		return r.complete(ctx, app, args[2:])
	}
	line := reorder(app.Commands, args)
	r.line = line
	if len(args) > 2 && args[1] == "help" && findCommand(app.Commands, args[2]) == nil {
		msg, code := errorLine(usagef("", "no help for %q: it is not a command", args[2]))
		fmt.Fprintln(stderr, msg)
		return code
	}
	err := app.RunContext(ctx, line.args)
	if err == nil {
		return ExitOK
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ExitInterrupted
	}
	msg, code := errorLine(err)
	if msg != "" {
		fmt.Fprintln(stderr, msg)
	}
	return code
}

// runner holds what one invocation shares between its verbs.
type runner struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	line           commandLine
	c              *jobs.Client
}

// client opens the database in detached mode, once, after the verb has
// validated its arguments.
func (r *runner) client(cc *ucli.Context) (*jobs.Client, error) {
	return r.openClient(cc, false)
}

// openClient is client; lazy defers opening the database to the first
// call that reads it (jobs.Options.LazyOpen), for start, which a warm
// supervisor answers without it.
func (r *runner) openClient(cc *ucli.Context, lazy bool) (*jobs.Client, error) {
	if r.c != nil {
		return r.c, nil
	}
	exe, _ := os.Executable()
	c, err := jobs.Open(cc.Context, jobs.Options{
		DB:         cc.String("db"),
		Scope:      cc.String("scope"),
		Detached:   true,
		Executable: exe,
		LazyOpen:   lazy,
	})
	if err != nil {
		return nil, err
	}
	r.c = c
	return c, nil
}

func (r *runner) close() {
	if r.c != nil {
		_ = r.c.Close()
	}
}

// jsonOut reports whether --json was given.
func jsonOut(cc *ucli.Context) bool { return cc.Bool("json") }

// printJSON writes v as indented JSON and a newline.
func (r *runner) printJSON(v any) error {
	enc := json.NewEncoder(r.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printLine writes one JSON object on one line (NDJSON).
func (r *runner) printLine(v any) error {
	enc := json.NewEncoder(r.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// stdoutFile is stdout when it is an *os.File (for terminal checks).
func (r *runner) stdoutFile() *os.File {
	f, _ := r.stdout.(*os.File)
	return f
}

func (r *runner) stderrFile() *os.File {
	f, _ := r.stderr.(*os.File)
	return f
}

// paint returns the painter for stdout.
func (r *runner) paint() painter { return newPainter(r.stdoutFile()) }

// note writes an informational line on stderr: what a read left out and how
// to get it. It is not an error.
func (r *runner) note(format string, args ...any) {
	fmt.Fprintf(r.stderr, "[jobs: "+format+"]\n", args...)
}

// args returns the positional arguments of the verb.
func args(cc *ucli.Context) []string { return cc.Args().Slice() }

// oneRef returns the single job reference a verb takes.
// refAndClient is what most one-job verbs start with: the job argument,
// then the client.
func (r *runner) refAndClient(cc *ucli.Context) (string, *jobs.Client, error) {
	ref, err := oneRef(cc)
	if err != nil {
		return "", nil, err
	}
	c, err := r.client(cc)
	return ref, c, err
}

func oneRef(cc *ucli.Context) (string, error) {
	a := args(cc)
	verb := cc.Command.Name
	switch {
	case len(a) == 0:
		return "", usagef(verb, "missing job id or name")
	case len(a) > 1:
		return "", usagef(verb, "too many arguments: %q", a[1:])
	case a[0] == "":
		return "", usagef(verb, "empty job id")
	}
	return a[0], nil
}

func init() {
	// urfave/cli's version flag is a package variable: --version only, -v
	// is free for verbs.
	ucli.VersionFlag = &ucli.BoolFlag{Name: "version", Usage: "print the version and exit", DisableDefaultText: true}
}

func (r *runner) app() *ucli.App {
	app := &ucli.App{
		Name:      "jobs",
		Version:   version(),
		Usage:     "run shell commands as durable background jobs",
		UsageText: "jobs [--db PATH] [--scope NAME] [--json] VERB [flags] [args]",
		Description: "Jobs keeps every job's metadata, status history and output in one SQLite database.\n" +
			"Start one with 'jobs start -- CMD…', read it with 'jobs poll ID' or 'jobs log ID'.\n" +
			"Exit status: 0 ok; 1 error; 2 usage; wait and start --wait exit with the job's status\n" +
			"(128+n for signal n); 124 when wait --timeout passes with the job still running.",
		Reader:          r.stdin,
		Writer:          r.stdout,
		ErrWriter:       r.stderr,
		Suggest:         false,
		ExitErrHandler:  func(*ucli.Context, error) {},
		CommandNotFound: func(cc *ucli.Context, name string) {},
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "db", Usage: "database `PATH` (default $XDG_STATE_HOME/jobs/jobs.db)", EnvVars: []string{"JOBS_DB"}},
			&ucli.StringFlag{Name: "scope", Usage: "scope `NAME`: the agent or conversation owning the jobs (default \"default\")", EnvVars: []string{"JOBS_SCOPE"}},
			&ucli.BoolFlag{Name: "json", Usage: "print stable JSON (see docs/json.md)", DisableDefaultText: true},
		},
		OnUsageError: func(cc *ucli.Context, err error, _ bool) error {
			return rewriteFlagError("", err)
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("", "unknown command %q", cc.Args().First())
			}
			return ucli.ShowAppHelp(cc)
		},
		Commands: r.commands(),
	}
	for _, c := range app.Commands {
		name := c.Name
		c.HideHelpCommand = true
		for _, f := range c.Flags {
			if b, ok := f.(*ucli.BoolFlag); ok {
				b.DisableDefaultText = true
			}
		}
		c.OnUsageError = func(cc *ucli.Context, err error, _ bool) error {
			return rewriteFlagError(name, err)
		}
	}
	return app
}

func (r *runner) commands() []*ucli.Command {
	return []*ucli.Command{
		r.startCommand(),
		r.pollCommand(),
		r.logCommand(),
		r.writeCommand(),
		r.killCommand(),
		r.listCommand(),
		r.statusCommand(),
		r.waitCommand(),
		r.eventsCommand(),
		r.clearCommand(),
		r.rmCommand(),
		r.gcCommand(),
		r.captureCommand(),
		r.sendKeysCommand(),
		r.attachCommand(),
		r.mcpCommand(),
		r.uiCommand(),
		r.completionCommand(),
		r.superviseCommand(),
		r.tmuxPipeCommand(), // hidden: tmux runs it for tmux jobs (tmuxpipe.go)
	}
}
