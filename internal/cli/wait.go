package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) waitCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "wait",
		Usage:     "block until jobs finish, output matches, or output goes quiet",
		ArgsUsage: "ID…",
		Description: "Sleeps (no polling loop) until every job has finished, or the first with --any. Prints\n" +
			"why it returned and exits with the job's status (128+n for a signal; with several jobs the\n" +
			"first non-zero one in the order given; with --any, the one that ended). --until, --idle and\n" +
			"--input exit 0 when they fire and 125 when the jobs end without them firing. When --timeout\n" +
			"passes first the exit status is 124. On a terminal a live line shows elapsed time, output\n" +
			"size and the last line.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "any", Usage: "return when the first job finishes"},
			&ucli.StringFlag{Name: "timeout", Usage: "give up after `DUR` (exit 124)"},
			&ucli.StringFlag{Name: "until", Usage: "return when a line of output matches `REGEX`"},
			&ucli.BoolFlag{Name: "clean", Usage: "match --until against the cleaned text of each line (escapes stripped, overwrites collapsed), as poll shows it"},
			&ucli.StringFlag{Name: "idle", Usage: "return when output has been silent for `DUR`"},
			&ucli.BoolFlag{Name: "input", Usage: "return when a job waits for input on stdin (a prompt; exit 0)"},
		},
		Action: r.wait,
	}
}

func (r *runner) wait(cc *ucli.Context) error {
	const verb = "wait"
	refs := args(cc)
	if len(refs) == 0 {
		return usagef(verb, "missing job id or name")
	}
	for _, ref := range refs {
		if ref == "" {
			return usagef(verb, "empty job id")
		}
	}
	var o jobs.WaitOptions
	o.Any = cc.Bool("any")
	o.Input = cc.Bool("input")
	o.Clean = cc.Bool("clean")
	if cc.IsSet("timeout") {
		d, err := parseDuration(verb, "timeout", cc.String("timeout"))
		if err != nil {
			return err
		}
		if d == 0 {
			return usagef(verb, "--timeout must be more than 0")
		}
		o.Timeout = d
	}
	if cc.IsSet("idle") {
		d, err := parseDuration(verb, "idle", cc.String("idle"))
		if err != nil {
			return err
		}
		if d == 0 {
			return usagef(verb, "--idle must be more than 0")
		}
		o.Idle = d
	}
	if cc.IsSet("until") {
		o.Until = cc.String("until")
		if o.Until == "" {
			return usagef(verb, "empty --until pattern")
		}
		if err := parseRegexp(verb, "until", o.Until); err != nil {
			return err
		}
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	var live *liveLine
	if !jsonOut(cc) && isTerminal(r.stderrFile()) {
		ctx := cc.Context
		live = &liveLine{w: r.stderr, start: time.Now(), lastLine: func(id string) string {
			out, err := c.Log(ctx, id, jobs.Range{TailLines: 1, Clean: true})
			if err != nil {
				return ""
			}
			return strings.TrimSpace(out.Text)
		}}
		o.Progress = live.update
	}
	res, err := c.Wait(cc.Context, refs, o)
	live.clear()
	if err != nil {
		if cc.Context.Err() != nil {
			return &exitError{code: ExitInterrupted, msg: "interrupted; the jobs keep running"}
		}
		return err
	}
	if jsonOut(cc) {
		if res.Jobs == nil {
			res.Jobs = []jobs.Job{}
		}
		if err := r.printJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprint(r.stdout, formatWait(res, o))
	}
	if code := waitExitCode(res, o); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// waitExitCode is the exit status of jobs wait: 124 on timeout, 0 when
// --until, --idle or --input fired, 125 when the jobs ended before it did;
// otherwise the job's own status: with --any the job that ended, else the
// first non-zero of the jobs in the order given.
func waitExitCode(res jobs.WaitResult, o jobs.WaitOptions) int {
	switch res.Reason {
	case jobs.WaitTimedOut:
		return ExitTimedOut
	case jobs.WaitMatched, jobs.WaitIdle, jobs.WaitInput:
		return 0
	}
	if o.Until != "" || o.Idle > 0 || o.Input {
		return ExitNotHappened
	}
	if o.Any && res.JobID != "" {
		for _, j := range res.Jobs {
			if j.ID == res.JobID && j.Status.Terminal() {
				return jobExitCode(j)
			}
		}
	}
	for _, j := range res.Jobs {
		if code := jobExitCode(j); code != 0 {
			return code
		}
	}
	return 0
}

// formatWait says why wait returned, then one line per job. When the jobs
// ended before --until, --idle or --input fired it says that first: the
// exit status 125 alone does not tell a person what did not happen.
func formatWait(res jobs.WaitResult, o jobs.WaitOptions) string {
	var b strings.Builder
	if waitExitCode(res, o) == ExitNotHappened {
		var missed []string
		if o.Until != "" {
			missed = append(missed, "no line matched --until "+quoted(o.Until))
		}
		if o.Idle > 0 {
			missed = append(missed, "output never went quiet for "+shortDuration(o.Idle))
		}
		if o.Input {
			missed = append(missed, "no job waited for input")
		}
		fmt.Fprintf(&b, "%s before the jobs ended\n", strings.Join(missed, "; "))
	}
	switch res.Reason {
	case jobs.WaitMatched:
		fmt.Fprintf(&b, "%s matched: %s\n", res.JobID, truncate(shown(res.Match), 200))
	case jobs.WaitIdle:
		fmt.Fprintf(&b, "%s went quiet\n", res.JobID)
	case jobs.WaitInput:
		fmt.Fprintf(&b, "%s waits for input (answer with jobs write)\n", res.JobID)
	case jobs.WaitTimedOut:
		var running []string
		for _, j := range res.Jobs {
			if !j.Status.Terminal() {
				running = append(running, j.ID)
			}
		}
		fmt.Fprintf(&b, "timed out; still running: %s\n", strings.Join(running, " "))
	}
	for _, j := range res.Jobs {
		if j.Status.Terminal() {
			fmt.Fprintf(&b, "%s %s\n", j.ID, endText(j))
		} else {
			fmt.Fprintf(&b, "%s %s for %s, %s output", j.ID, statusText(j), formatDuration(j.Runtime), parse.FormatSize(j.OutputBytes))
			if j.DroppedBytes > 0 {
				fmt.Fprintf(&b, "; %s", droppedText(j.DroppedBytes))
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// liveLine keeps one status line up to date on a terminal while wait
// sleeps.
type liveLine struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	shown bool
	// lastLine returns the last line of a job's output.
	lastLine func(id string) string
}

func (l *liveLine) update(js []jobs.Job) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var size int64
	running := 0
	last := ""
	for _, j := range js {
		size += j.OutputBytes
		if !j.Status.Terminal() {
			running++
			if last == "" && l.lastLine != nil && j.OutputBytes > 0 {
				last = l.lastLine(j.ID)
			}
		}
	}
	s := fmt.Sprintf("waiting %s · %d of %d running · %s output", formatDuration(time.Since(l.start).Truncate(time.Second)), running, len(js), parse.FormatSize(size))
	if last != "" {
		s += " · " + shown(last)
	}
	fmt.Fprintf(l.w, "\r\x1b[K%s", truncate(s, 110))
	l.shown = true
}

func (l *liveLine) clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
	}
}
