package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"
)

func (r *runner) startCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "start",
		Usage:     "start a job and print its id",
		ArgsUsage: "'COMMAND LINE' | -- PROGRAM ARG…",
		Description: "One argument is a shell command line, run by bash -c when bash is installed, else\n" +
			"/bin/sh -c (--shell chooses; the shell is recorded in the job's argv); several arguments\n" +
			"after '--' are a program and its arguments, run directly.\n\n" +
			"With --wait the output streams here and jobs exits with the job's status. With --yield DUR\n" +
			"(default $PI_BASH_YIELD_MS milliseconds when set) jobs waits up to DUR: a job that finished\n" +
			"is shown as --wait shows it, else the id is printed followed by 'running'.",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "name", Usage: "a `NAME` unique among the scope's active jobs; works wherever an id does"},
			&ucli.BoolFlag{Name: "replace", Usage: "end the running job with the same --name first"},
			&ucli.StringFlag{Name: "cwd", Usage: "working `DIR` (default: the current directory)"},
			&ucli.StringSliceFlag{Name: "env", Usage: "add `KEY=VALUE` to the environment, or KEY with its value here (repeatable; only the names are stored)", KeepSpace: true},
			&ucli.StringSliceFlag{Name: "label", Usage: "free `TEXT` shown by list (repeatable: several labels are kept as one text, joined with \", \")", KeepSpace: true},
			&ucli.StringFlag{Name: "timeout", Usage: "maximum runtime `DUR`, 0 for none (default " + shortDuration(jobs.DefaultTimeout) + ")"},
			&ucli.StringFlag{Name: "ttl", Usage: "keep the finished job `DUR` after its last access, 0 for ever (default " + shortDuration(jobs.DefaultTTL) + " or $PI_BASH_JOB_TTL_MS)"},
			&ucli.StringFlag{Name: "max-output", Usage: "output `SIZE` kept (first 1 MiB and the newest rest), 0 for no cap (default " + parse.FormatSize(jobs.DefaultMaxOutput) + ")"},
			&ucli.BoolFlag{Name: "no-stdin", Usage: "give the job /dev/null as stdin instead of a pipe"},
			&ucli.BoolFlag{Name: "color", Usage: "keep colour: do not set NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat"},
			&ucli.StringFlag{Name: "shell", Usage: "run a one-argument command line with `SHELL` -c (default bash, else /bin/sh)"},
			&ucli.BoolFlag{Name: "tmux", Usage: "run the job in its own tmux session"},
			&ucli.BoolFlag{Name: "keep-tmux", Usage: "leave the tmux session open after the job ends"},
			&ucli.BoolFlag{Name: "pty", Usage: "run the job in a pseudo-terminal: programs line-buffer and colour as on a terminal, one stream (pty) in true order; input with write and send-keys, ^D for end of file"},
			&ucli.StringFlag{Name: "size", Usage: "a --pty job's window `COLSxROWS` (default 80x24)"},
			&ucli.BoolFlag{Name: "merge", Usage: "one pipe for stdout and stderr, stored in the order written as stream stdout (default: two pipes, each stream in its own order, their interleaving within a moment not kept)"},
			&ucli.StringFlag{Name: "on-exit", Usage: "run shell `CMD` once when the job ends (JOBS_ID, JOBS_STATUS, JOBS_EXIT_CODE … set)"},
			&ucli.BoolFlag{Name: "wait", Usage: "stream the output and exit with the job's status"},
			&ucli.StringFlag{Name: "yield", Usage: "wait up to `DUR`: show the result if it finished, else print the id and 'running'"},
		}, queueStartFlags()...), // queue.go
		Action: r.start,
	}
}

// startRequest is a validated start command line.
type startRequest struct {
	spec  jobs.Spec
	wait  bool
	yield time.Duration // 0: do not yield
	limit int64         // character limit for a yielded result, 0: none
}

func (r *runner) parseStart(cc *ucli.Context) (startRequest, error) {
	const verb = "start"
	var req startRequest
	spec := &req.spec
	pos := args(cc)
	if r.line.dashed {
		before := pos[:len(pos)-len(r.line.dashArgs)]
		dash := r.line.dashArgs
		switch {
		case len(before) > 0:
			return req, usagef(verb, "give the command either quoted or after '--', not both")
		case len(dash) == 0:
			return req, usagef(verb, "missing command after '--'")
		case len(dash) == 1:
			spec.Command = dash[0]
		default:
			spec.Argv = dash
		}
	} else {
		switch len(pos) {
		case 0:
			return req, usagef(verb, "missing command")
		case 1:
			spec.Command = pos[0]
		default:
			return req, usagef(verb, "several arguments: put '--' before a program and its arguments, or quote the command line")
		}
	}
	if spec.Command == "" && len(spec.Argv) == 0 || spec.Argv == nil && strings.TrimSpace(spec.Command) == "" {
		return req, usagef(verb, "empty command")
	}
	if len(spec.Argv) > 0 && spec.Argv[0] == "" {
		return req, usagef(verb, "empty program name")
	}

	if cc.IsSet("shell") {
		if spec.Command == "" {
			return req, usagef(verb, "--shell applies to a one-argument command line, not to a program run directly")
		}
		if spec.Shell = cc.String("shell"); strings.TrimSpace(spec.Shell) == "" {
			return req, usagef(verb, "empty --shell")
		}
	}
	if err := r.startDefaults(cc, spec); err != nil {
		return req, err
	}
	spec.Name = cc.String("name")
	spec.Replace = cc.Bool("replace")
	if spec.Replace && spec.Name == "" {
		return req, usagef(verb, "--replace needs --name")
	}
	spec.Label = joinLabels(cc.StringSlice("label"))
	spec.Env = cc.StringSlice("env")
	for i, e := range spec.Env {
		// --env KEY takes KEY's value from this environment, so that a
		// secret need not be on any command line, this one included.
		if !strings.Contains(e, "=") {
			v, ok := os.LookupEnv(e)
			if !ok {
				return req, usagef(verb, "--env %s: not set in this environment (give NAME=value, or NAME to pass this environment's value)", quoted(e))
			}
			spec.Env[i] = e + "=" + v
		}
	}
	spec.NoStdin = cc.Bool("no-stdin")
	spec.Color = cc.Bool("color")
	spec.Tmux = cc.Bool("tmux")
	spec.KeepTmux = cc.Bool("keep-tmux")
	if spec.KeepTmux && !spec.Tmux {
		return req, usagef(verb, "--keep-tmux needs --tmux")
	}
	spec.PTY = cc.Bool("pty")
	spec.Merge = cc.Bool("merge")
	switch {
	case spec.PTY && spec.Tmux:
		return req, usagef(verb, "--pty and --tmux: a job runs in one terminal, choose one")
	case spec.Merge && (spec.PTY || spec.Tmux):
		return req, usagef(verb, "--merge is for pipe jobs: a terminal has one stream already")
	case spec.PTY && spec.NoStdin:
		return req, usagef(verb, "--no-stdin with --pty: a pty job's stdin is its terminal")
	case cc.IsSet("size") && !spec.PTY:
		return req, usagef(verb, "--size needs --pty")
	case cc.IsSet("size"):
		cols, rows, err := parseWinSize(cc.String("size"))
		if err != nil {
			return req, usagef(verb, "--size %s: %v", quoted(cc.String("size")), err)
		}
		spec.Cols, spec.Rows = cols, rows
	}
	spec.OnExit = cc.String("on-exit")
	if cc.IsSet("on-exit") && strings.TrimSpace(spec.OnExit) == "" {
		return req, usagef(verb, "empty --on-exit command")
	}

	if cc.IsSet("timeout") {
		d, err := parseDuration(verb, "timeout", cc.String("timeout"))
		if err != nil {
			return req, err
		}
		spec.Timeout = noneIfZero(d)
	}
	if cc.IsSet("ttl") {
		d, err := parseDuration(verb, "ttl", cc.String("ttl"))
		if err != nil {
			return req, err
		}
		spec.TTL = noneIfZero(d)
	}
	if cc.IsSet("max-output") {
		n, err := parseSize(verb, "max-output", cc.String("max-output"))
		if err != nil {
			return req, err
		}
		spec.MaxOutput = n
		if n == 0 {
			spec.MaxOutput = jobs.Unlimited
		}
	}

	req.wait = cc.Bool("wait")
	if cc.IsSet("yield") {
		if req.wait {
			return req, usagef(verb, "give --wait or --yield, not both")
		}
		d, err := parseDuration(verb, "yield", cc.String("yield"))
		if err != nil {
			return req, err
		}
		req.yield = d
	} else if !req.wait {
		d, ok, err := envMillis(verb, "PI_BASH_YIELD_MS")
		if err != nil {
			return req, err
		}
		if ok {
			req.yield = d
		}
	}
	n, _, err := envChars(verb, charLimitEnv...)
	if err != nil {
		return req, err
	}
	req.limit = n

	// pkg/jobs resolves the directory (relative to ours) and checks it.
	cwd := cc.String("cwd")
	if cc.IsSet("cwd") && cwd == "" {
		return req, usagef(verb, "empty --cwd")
	}
	spec.Cwd = cwd
	return req, applyQueueFlags(cc, verb, spec)
}

// noneIfZero maps the CLI's "0 means none" to the Spec's Unlimited (0 in
// a Spec means the default).
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return jobs.Unlimited
	}
	return d
}

func (r *runner) start(cc *ucli.Context) error {
	req, err := r.parseStart(cc)
	if err != nil {
		return err
	}
	c, err := r.openClient(cc, true)
	if err != nil {
		return err
	}
	ctx := cc.Context
	j, err := c.Start(ctx, req.spec)
	if err != nil {
		return err
	}
	if j.Status == jobs.StatusFailed && j.StartedAt == nil {
		// Could not start: say why, as an error, after the id for the record.
		if jsonOut(cc) {
			_ = r.printJSON(j)
		} else {
			fmt.Fprintln(r.stdout, j.ID)
		}
		reason := j.Reason
		if reason == "" {
			reason = "could not start"
		}
		return &exitError{code: jobExitCode(j), msg: fmt.Sprintf("job %s failed: %s", j.ID, oneLine(reason))}
	}
	switch {
	case req.wait:
		return r.waitAndShow(cc, c, j, 0)
	case req.yield > 0:
		res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: req.yield})
		if err != nil {
			return err
		}
		if res.Reason == jobs.WaitTimedOut {
			if jsonOut(cc) {
				p, err := c.Poll(ctx, j.ID, jobs.PollOptions{Tail: limitOr(req.limit, jobs.DefaultTailChars)})
				if err != nil {
					return err
				}
				return r.printJSON(p)
			}
			fmt.Fprintf(r.stdout, "%s running\n", j.ID)
			return nil
		}
		return r.waitAndShow(cc, c, j, req.limit)
	}
	if jsonOut(cc) {
		return r.printJSON(j)
	}
	fmt.Fprintln(r.stdout, j.ID)
	r.queuedNote(j, req.spec)
	return nil
}

func limitOr(n, def int64) int64 {
	if n > 0 {
		return n
	}
	return def
}

// waitAndShow streams a job's output until it ends (stdout to stdout,
// stderr to stderr), then exits with its status. With limit > 0 and more
// output than that, it shows the cleaned tail instead and says what it left
// out. With --json it waits quietly and prints the poll result.
func (r *runner) waitAndShow(cc *ucli.Context, c *jobs.Client, j jobs.Job, limit int64) error {
	ctx := cc.Context
	if jsonOut(cc) {
		if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
			return interrupted(ctx, j, err)
		}
		p, err := c.Poll(ctx, j.ID, jobs.PollOptions{Tail: limitOr(limit, jobs.DefaultTailChars)})
		if err != nil {
			return err
		}
		if err := r.printJSON(p); err != nil {
			return err
		}
		return exitWith(p.Job)
	}
	if limit > 0 {
		cur, err := c.Get(ctx, j.ID)
		if err != nil {
			return err
		}
		if cur.Status.Terminal() && cur.OutputBytes > limit {
			p, err := c.Poll(ctx, j.ID, jobs.PollOptions{Tail: limit})
			if err != nil {
				return err
			}
			r.note("%s of output before this; read it with: jobs log %s --offset 0", parse.FormatSize(p.Output.OmittedBefore), j.ID)
			fmt.Fprint(r.stdout, ensureNewline(p.Output.Text))
			return r.finish(p.Job)
		}
	}
	if err := r.stream(ctx, c, j); err != nil {
		return interrupted(ctx, j, err)
	}
	final, err := c.Get(ctx, j.ID)
	if err != nil {
		return err
	}
	return r.finish(final)
}

// parseWinSize reads a window size, COLSxROWS.
func parseWinSize(s string) (cols, rows int, err error) {
	c, r, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		cols, err = strconv.Atoi(c)
		if err == nil {
			rows, err = strconv.Atoi(r)
		}
	}
	if !ok || err != nil || cols < 1 || rows < 1 || cols > 0xffff || rows > 0xffff {
		return 0, 0, fmt.Errorf("give columns x rows, each 1 to 65535, such as 120x40")
	}
	return cols, rows, nil
}

// stream follows the job's output to the terminal until the job ends.
func (r *runner) stream(ctx context.Context, c *jobs.Client, j jobs.Job) error {
	if j.Mode == jobs.ModeTmux || j.Mode == jobs.ModePTY {
		return c.Follow(ctx, j.ID, jobs.Range{ByteRange: true}, r.stdout)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return c.Follow(gctx, j.ID, jobs.Range{ByteRange: true, Stream: jobs.Stdout}, r.stdout)
	})
	g.Go(func() error {
		return c.Follow(gctx, j.ID, jobs.Range{ByteRange: true, Stream: jobs.Stderr}, r.stderr)
	})
	return g.Wait()
}

// finish ends start --wait: a line on stderr when the job did not succeed,
// and the job's exit status.
func (r *runner) finish(j jobs.Job) error {
	if j.Status == jobs.StatusDone {
		if j.DroppedBytes > 0 {
			fmt.Fprintf(r.stderr, "jobs: job %s: %s\n", j.ID, droppedText(j.DroppedBytes))
		}
		return exitWith(j)
	}
	return &exitError{code: jobExitCode(j), msg: "job " + j.ID + " " + endText(j)}
}

// endText says how a finished job ended: "failed (exit 2) after 3.1s".
func endText(j jobs.Job) string {
	s := statusText(j)
	if j.Reason != "" && (j.Status == jobs.StatusFailed || j.Status == jobs.StatusLost) {
		s += ": " + shown(oneLine(j.Reason))
	}
	s += " after " + formatDuration(j.Runtime)
	if j.DroppedBytes > 0 {
		s += "; " + droppedText(j.DroppedBytes)
	}
	return s
}

// droppedText says how much of a job's output a full disk dropped.
func droppedText(n int64) string {
	return fmt.Sprintf("%d bytes of output dropped (%s): the disk was full", n, parse.FormatSize(n))
}

// interrupted turns a cancelled wait into a message that the job runs on.
func interrupted(ctx context.Context, j jobs.Job, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: ExitInterrupted, msg: fmt.Sprintf("interrupted; job %s keeps running ('jobs kill %s' ends it)", j.ID, j.ID)}
	}
	return err
}

// exitWith returns nil for a job that exited 0, else an exitError with the
// job's status and no message.
func exitWith(j jobs.Job) error {
	if code := jobExitCode(j); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// jobExitCode is the exit status jobs uses for a finished job: its own exit
// code, 128+n for death by signal n, 127 when it could not start, 1 for a
// job that ended otherwise without a status (lost). A running job gives 0.
func jobExitCode(j jobs.Job) int {
	if !j.Status.Terminal() {
		return 0
	}
	if j.Signal != "" {
		if n := signalNumber(j.Signal); n > 0 {
			return 128 + n
		}
	}
	if j.ExitCode != nil {
		if *j.ExitCode == 0 && j.Status != jobs.StatusDone {
			return 1
		}
		return *j.ExitCode & 0xff
	}
	switch j.Status {
	case jobs.StatusDone:
		return 0
	case jobs.StatusFailed:
		if j.StartedAt == nil {
			return 127
		}
	case jobs.StatusKilled, jobs.StatusTimedOut:
		return 128 + 9
	}
	return 1
}

func ensureNewline(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

// joinLabels keeps several --label values as the one label text a job
// has, in the order given: list --label TEXT finds the job by any of them.
func joinLabels(labels []string) string { return strings.Join(labels, ", ") }
