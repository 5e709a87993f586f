package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
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
	return r.run(ctx, args)
}

// run parses args and runs the verb, printing any error as one line on
// stderr, and returns the exit status.
func (r *runner) run(ctx context.Context, args []string) int {
	stderr := r.stderr
	app := r.app()
	if len(args) > 1 && args[1] == completeVerb {
		return r.complete(ctx, app, args[2:])
	}
	line := reorder(app.Commands, args)
	r.line = line
	if len(args) > 2 && args[1] == "help" && findCommand(app.Commands, args[2]) == nil {
		msg, code := errorLine(usagef("", "no help for %s: it is not a command%s", quoted(args[2]), didYouMean(args[2], commandNames(app.Commands), "")))
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
	// srcs are the databases read at once (several --db), opened holds
	// their clients for close.
	srcs   []*source
	opened []*jobs.Client
	// writeTimeout is jobs write's --timeout, for the client's options.
	writeTimeout time.Duration
	// cfg is the config file and environment, read on first use.
	cfg *config
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
	path, err := dbPath(cc)
	if err != nil {
		return nil, err
	}
	if readVerbs[cc.Command.Name] && path != "" {
		if err := databaseExists(path); err != nil {
			return nil, err
		}
	}
	scope, err := r.scope(cc)
	if err != nil {
		return nil, err
	}
	exe, _ := os.Executable()
	// gc is the janitor of the host whose supervisors write the database:
	// another host's database it leaves as it is, like a read.
	c, err := jobs.Open(cc.Context, jobs.Options{
		DB:           path,
		Scope:        scope,
		Detached:     true,
		Executable:   exe,
		LazyOpen:     lazy,
		WriteTimeout: r.writeTimeout,
		ReadOnly:     cc.Bool("read-only"),
		OnlyReads:    readVerbs[cc.Command.Name] || cc.Command.Name == "gc",
	})
	if err != nil {
		return nil, err
	}
	r.c = c
	return c, nil
}

// databaseExists refuses a read of a database named by --db or JOBS_DB
// that is not there: a read reports, so a mistyped path must not create a
// database and its directories (start does, on first use). The default
// database is jobs' own and is created on any first use.
func databaseExists(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s: nothing has run with it yet ('jobs start' creates it)", textclean.Echo(path))
	}
	return nil
}

func (r *runner) close() {
	if r.c != nil && !slices.Contains(r.opened, r.c) {
		_ = r.c.Close()
	}
	for _, c := range r.opened {
		_ = c.Close()
	}
}

// jsonOut reports whether --json was given.
func jsonOut(cc *ucli.Context) bool { return cc.Bool("json") }

// printJSON writes v as indented JSON and a newline.
func (r *runner) printJSON(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := r.stdout.Write(escapeJSON(b.Bytes()))
	return err
}

// printLine writes one JSON object on one line (NDJSON).
func (r *runner) printLine(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := r.stdout.Write(escapeJSON(b.Bytes()))
	return err
}

// escapeJSON writes the C1 controls (U+0080–U+009F) and the invisible
// characters (textclean.Invisible: bidi controls, zero-width characters) of
// encoded JSON as \u escapes. encoding/json escapes only C0 controls, yet a terminal may act on
// UTF-8 encoded C1 controls and bidi overrides reorder the line when the
// JSON is read on screen. The escapes decode to the same strings, and
// outside strings JSON holds none of these characters.
func escapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool {
		return (r >= 0x80 && r <= 0x9f) || textclean.Invisible(r)
	}) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if (r >= 0x80 && r <= 0x9f) || textclean.Invisible(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
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
	if multi(cc) && multiVerbs[cc.Command.Name] {
		if _, err := r.sourceOf(cc, ref); err != nil {
			return "", nil, err
		}
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
		return "", usagef(verb, "too many arguments: %s", quoted(strings.Join(a[1:], " ")))
	case a[0] == "":
		return "", usagef(verb, "empty job id")
	}
	return a[0], nil
}

func init() {
	// urfave/cli's version flag is a package variable: --version only, -v
	// is free for verbs.
	ucli.VersionFlag = &ucli.BoolFlag{Name: "version", Usage: "print the version and exit", DisableDefaultText: true}
	ucli.FlagStringer = flagHelp(ucli.FlagStringer)
}

// flagHelp wraps urfave/cli's flag help line. It shows a flag's value as
// its default; for a flag left at its zero value that is "(default: 0)",
// which is wrong whenever the zero means "not given" (the real default is
// then in the usage text, e.g. 500 characters) and says nothing when it
// means "none". So a zero value shows no default.
func flagHelp(orig ucli.FlagStringFunc) ucli.FlagStringFunc {
	return func(f ucli.Flag) string {
		s := orig(f)
		for _, zero := range []string{" (default: 0)", ` (default: "")`, " (default: 0s)", " (default: 0.000000)"} {
			if i := strings.Index(s, zero); i >= 0 {
				s = s[:i] + s[i+len(zero):]
			}
		}
		return s
	}
}

func (r *runner) app() *ucli.App {
	app := &ucli.App{
		Name:      "jobs",
		Version:   version(),
		Usage:     "run shell commands as durable background jobs",
		UsageText: "jobs [--db PATH]… [--read-only] [--scope NAME] [--json] VERB [flags] [args]",
		Description: "Jobs keeps every job's metadata, status history and output in one SQLite database.\n" +
			"Start one with 'jobs start -- CMD…', read it with 'jobs poll ID' or 'jobs log ID'.\n" +
			"Exit status: 0 ok; 1 error; 2 usage; wait and start --wait exit with the job's status\n" +
			"(128+n for signal n), as log -f does; 124 when wait --timeout passes with the job still running;\n" +
			"125 when wait --until, --idle or --input did not happen before the jobs ended; 130 when interrupted.\n" +
			"Defaults come from ~/.config/jobs/config.toml and the environment: 'jobs config' shows them.",
		Reader:          r.stdin,
		Writer:          r.stdout,
		ErrWriter:       r.stderr,
		Suggest:         false,
		ExitErrHandler:  func(*ucli.Context, error) {},
		CommandNotFound: func(cc *ucli.Context, name string) {},
		Flags: []ucli.Flag{
			// Not EnvVars: JOBS_DB is one path, which a slice flag would
			// split; DefaultDBPath reads it.
			&ucli.StringSliceFlag{Name: "db", Usage: "database `PATH` (default $JOBS_DB, else $XDG_STATE_HOME/jobs/jobs.db); list, status, log and events take several, read-only"},
			&ucli.StringFlag{Name: "scope", Usage: "scope `NAME`: the agent or conversation owning the jobs (default \"default\")", EnvVars: []string{"JOBS_SCOPE"}},
			&ucli.BoolFlag{Name: "json", Usage: "print stable JSON (see docs/json.md)", DisableDefaultText: true},
			&ucli.BoolFlag{Name: "read-only", Usage: "open the database read-only: nothing is written (an audit, a restored copy); verbs that write refuse", DisableDefaultText: true},
		},
		// A path may hold a comma; --status and --env split their own.
		DisableSliceFlagSeparator: true,
		OnUsageError: func(cc *ucli.Context, err error, _ bool) error {
			return rewriteFlagError("", err, flagNames(cc.App.Flags))
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				verb := cc.Args().First()
				return usagef("", "unknown command %s%s", quoted(verb), didYouMean(verb, commandNames(cc.App.Commands), ""))
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
		flags := append(flagNames(c.Flags), flagNames(app.Flags)...)
		c.OnUsageError = func(cc *ucli.Context, err error, _ bool) error {
			return rewriteFlagError(name, err, flags)
		}
	}
	return app
}

func (r *runner) commands() []*ucli.Command {
	return []*ucli.Command{
		r.startCommand(),
		r.restartCommand(),
		r.queueCommand(),
		r.pollCommand(),
		r.logCommand(),
		r.writeCommand(),
		r.killCommand(),
		r.pauseCommand(),
		r.resumeCommand(),
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
		r.configCommand(),
		r.superviseCommand(),
		r.tmuxPipeCommand(), // hidden: tmux runs it for tmux jobs (tmuxpipe.go)
		r.tmuxExecCommand(), // hidden: a tmux job's pane starts with it (tmuxpipe.go)
	}
}
