package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) pollCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "poll",
		Usage:     "show a job's status and the cleaned tail of its output",
		ArgsUsage: "ID",
		Description: "Shows status, exit code, runtime, output size, whether the job waits for input, and\n" +
			"the last characters of its output with escape codes stripped and progress bars collapsed.\n" +
			"The character limit defaults to $PI_BASH_MAX_OUTPUT_CHARS or\n" +
			"$OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS when set, else 500.",
		Flags: []ucli.Flag{
			&ucli.Int64Flag{Name: "tail", Usage: fmt.Sprintf("show the last `N` characters of output (default %d, or $PI_BASH_MAX_OUTPUT_CHARS)", jobs.DefaultTailChars)},
			&ucli.BoolFlag{Name: "new", Usage: "show only output since the previous --new read (the newest part when more is new), and advance the cursor"},
			&ucli.StringFlag{Name: "grep", Usage: "keep only lines matching `REGEX`"},
			&ucli.BoolFlag{Name: "raw", Usage: "output bytes as they are, not cleaned"},
		},
		Action: r.poll,
	}
}

func (r *runner) poll(cc *ucli.Context) error {
	const verb = "poll"
	ref, err := oneRef(cc)
	if err != nil {
		return err
	}
	o := jobs.PollOptions{Tail: jobs.DefaultTailChars, Grep: cc.String("grep"), Raw: cc.Bool("raw")}
	if n, ok, err := envChars(verb, charLimitEnv...); err != nil {
		return err
	} else if ok {
		o.Tail = n
	}
	if cc.IsSet("tail") {
		o.Tail = cc.Int64("tail")
		if err := nonNegative(verb, "tail", o.Tail); err != nil {
			return err
		}
		if o.Tail == 0 {
			// The engine reads 0 as "the default"; a user who typed 0 asked
			// for something else, as log --tail 0 does.
			return usagef(verb, "--tail must be at least 1 (leave it out for %d characters)", jobs.DefaultTailChars)
		}
	}
	if cc.IsSet("grep") {
		if err := parseRegexp(verb, "grep", o.Grep); err != nil {
			return err
		}
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	var p jobs.PollResult
	if cc.Bool("new") {
		o.Newest = o.Grep == "" // the newest part when more is new than --tail
		p, err = c.ReadNew(cc.Context, ref, o)
	} else {
		p, err = c.Poll(cc.Context, ref, o)
	}
	if err != nil {
		return err
	}
	if jsonOut(cc) {
		return r.printJSON(p)
	}
	fmt.Fprint(r.stdout, formatPoll(p, time.Now(), r.paint(), cc.Bool("new")))
	return nil
}

// formatPoll renders a poll result: a header line, a line on what was left
// out when anything was, and the text.
func formatPoll(p jobs.PollResult, now time.Time, pt painter, isNew bool) string {
	j := p.Job
	var b strings.Builder
	head := []string{pt.bold(j.ID), pt.status(j.Status, statusText(j))}
	if j.PID > 0 && !j.Status.Terminal() && !j.MainExited {
		head = append(head, fmt.Sprintf("pid %d", j.PID))
	}
	head = append(head, formatDuration(j.Runtime))
	head = append(head, parse.FormatSize(j.OutputBytes)+" output")
	if j.LastOutputAt != nil && !j.Status.Terminal() {
		head = append(head, "last "+formatAge(now, *j.LastOutputAt))
	}
	b.WriteString(strings.Join(head, "  "))
	b.WriteByte('\n')
	if j.Reason != "" && j.Status != jobs.StatusDone && j.Status.Terminal() {
		fmt.Fprintf(&b, "reason: %s\n", shown(oneLine(j.Reason)))
	}
	if s := omittedText(p.Output, j.ID, isNew); s != "" {
		b.WriteString(pt.dim(s))
		b.WriteByte('\n')
	}
	if p.Output.Text == "" && isNew {
		b.WriteString(pt.dim("(no new output)"))
		b.WriteByte('\n')
	}
	if p.Output.Text != "" {
		b.WriteString(pt.dim("---"))
		b.WriteByte('\n')
		b.WriteString(ensureNewline(p.Output.Text))
	}
	return b.String()
}

// gapWords names the bytes missing inside a range after what the job can
// have lost: evicted by the cap or a clear, or dropped on a full disk.
func gapWords(evicted, dropped int64) string {
	switch {
	case dropped == 0:
		return "evicted by the output cap or jobs clear"
	case evicted == 0:
		return "dropped: the disk was full"
	}
	return "evicted by the output cap or jobs clear, or dropped on a full disk"
}

// omittedText says what a read left out and how to page to it, or "".
func omittedText(o jobs.Output, id string, isNew bool) string {
	var parts []string
	// Evicted bytes outside the page lie before it (the cap keeps the head
	// and the newest output): they are gone, not worth a hint.
	earlier := o.OmittedBefore - max(o.EvictedTotal-o.Evicted, 0)
	if isNew && o.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%s of new output skipped (jobs log %s --offset %d)", parse.FormatSize(o.Skipped), id, o.SkippedFrom))
	} else if earlier > 0 && !isNew {
		// Where the text starts, exactly, for paging by byte or by line.
		parts = append(parts, fmt.Sprintf("%s earlier, before line %d at byte %d (jobs log %s --offset 0)", parse.FormatSize(earlier), o.FirstLine, o.Start, id))
	}
	if o.OmittedAfter > 0 {
		parts = append(parts, fmt.Sprintf("%s more after this (jobs log %s --offset %d)", parse.FormatSize(o.OmittedAfter), id, o.NextOffset))
	}
	if o.Evicted > 0 {
		parts = append(parts, fmt.Sprintf("%s inside this range %s", parse.FormatSize(o.Evicted), gapWords(o.EvictedTotal, o.DroppedTotal)))
	} else {
		if o.EvictedTotal > 0 {
			parts = append(parts, fmt.Sprintf("%s evicted by the output cap or jobs clear", parse.FormatSize(o.EvictedTotal)))
		}
		if o.DroppedTotal > 0 {
			parts = append(parts, fmt.Sprintf("%s dropped: the disk was full", parse.FormatSize(o.DroppedTotal)))
		}
	}
	if o.CutLines > 0 {
		parts = append(parts, fmt.Sprintf("truncated: %d line(s) longer than %s searched and shown in part", o.CutLines, parse.FormatSize(jobs.MaxGrepLine)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func (r *runner) logCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "log",
		Usage:     "print a job's output (raw bytes unless --clean)",
		ArgsUsage: "ID",
		Description: "Without a selection, prints the last 500 characters. Select a byte range with\n" +
			"--offset/--limit, a line range with --from-line/--lines (lines count from 1), or the last\n" +
			"N lines with --tail. What the read left out is said on stderr.\n\n" +
			"--grep searches the whole retained log, a page at a time, and prints each matching line\n" +
			"after its line number (--json: line and byte offset); --lines N shows the first N matches,\n" +
			"--tail N the last N, --from-line N starts at line N. Every match is counted, and what\n" +
			"could not be searched (output evicted by --max-output) is said on stderr. With\n" +
			"--offset/--limit or --stream, --grep filters that page instead.",
		Flags: []ucli.Flag{
			&ucli.Int64Flag{Name: "offset", Usage: "start at absolute byte `OFFSET`"},
			&ucli.StringFlag{Name: "limit", Usage: fmt.Sprintf("read at most `SIZE` bytes: a number, or with a unit as 64KiB (default %s, at most %s)", parse.FormatSize(jobs.DefaultPageBytes), parse.FormatSize(jobs.MaxPageBytes))},
			&ucli.Int64Flag{Name: "from-line", Usage: "start at line `N` (from 1; of --stream alone when given)"},
			&ucli.Int64Flag{Name: "lines", Usage: fmt.Sprintf("read `N` lines (default %d)", jobs.DefaultLogLines)},
			&ucli.Int64Flag{Name: "tail", Usage: "read the last `N` lines"},
			&ucli.StringFlag{Name: "stream", Usage: "only `STREAM`: stdout or stderr"},
			&ucli.StringFlag{Name: "grep", Usage: "search the whole log for lines matching `REGEX`"},
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing output as it comes until the job ends, then exit with its status"},
			&ucli.BoolFlag{Name: "clean", Usage: "strip escape codes and collapse carriage-return overwrites"},
			&ucli.BoolFlag{Name: "all", Usage: "print all retained output (from --offset, default 0) to the end, page by page"},
		},
		Action: r.log,
	}
}

func (r *runner) parseRange(cc *ucli.Context) (jobs.Range, error) {
	const verb = "log"
	var rg jobs.Range
	for _, f := range []string{"offset", "from-line", "lines", "tail"} {
		if err := nonNegative(verb, f, cc.Int64(f)); err != nil {
			return rg, err
		}
	}
	byteSel := cc.IsSet("offset") || cc.IsSet("limit")
	lineSel := cc.IsSet("from-line") || cc.IsSet("lines")
	tailSel := cc.IsSet("tail")
	n := 0
	for _, b := range []bool{byteSel, lineSel, tailSel} {
		if b {
			n++
		}
	}
	if n > 1 {
		return rg, usagef(verb, "give one selection: --offset/--limit, --from-line/--lines or --tail")
	}
	switch {
	case byteSel:
		rg.ByteRange = true
		rg.Offset = cc.Int64("offset")
		if cc.IsSet("limit") {
			n, err := parseSize(verb, "limit", cc.String("limit"))
			if err != nil {
				return rg, err
			}
			rg.Limit = n
		}
		if cc.IsSet("limit") && rg.Limit == 0 {
			return rg, usagef(verb, "--limit must be at least 1")
		}
		if rg.Limit > jobs.MaxPageBytes {
			return rg, usagef(verb, "--limit %s is more than the %s a read may return", cc.String("limit"), parse.FormatSize(jobs.MaxPageBytes))
		}
	case lineSel:
		rg.FromLine = cc.Int64("from-line")
		rg.Lines = cc.Int64("lines")
		if cc.IsSet("from-line") && rg.FromLine == 0 {
			return rg, usagef(verb, "--from-line counts from 1")
		}
		if rg.FromLine == 0 {
			rg.FromLine = 1
		}
		if cc.IsSet("lines") && rg.Lines == 0 {
			return rg, usagef(verb, "--lines must be at least 1")
		}
	case tailSel:
		rg.TailLines = cc.Int64("tail")
		if rg.TailLines == 0 {
			return rg, usagef(verb, "--tail must be at least 1")
		}
	}
	switch s := cc.String("stream"); s {
	case "":
	case "stdout", "stderr", "pty":
		rg.Stream = jobs.Stream(s)
	default:
		return rg, usagef(verb, "invalid --stream %s: want stdout or stderr", quoted(s))
	}
	if cc.IsSet("grep") {
		rg.Grep = cc.String("grep")
		if err := parseRegexp(verb, "grep", rg.Grep); err != nil {
			return rg, err
		}
	}
	rg.Clean = cc.Bool("clean")
	return rg, nil
}

func (r *runner) log(cc *ucli.Context) error {
	ref, err := oneRef(cc)
	if err != nil {
		return err
	}
	rg, err := r.parseRange(cc)
	if err != nil {
		return err
	}
	follow := cc.Bool("follow")
	if follow && jsonOut(cc) {
		return usagef("log", "--follow prints raw output; it cannot be combined with --json")
	}
	if follow && (rg.TailLines > 0 || rg.Lines > 0 || rg.Limit > 0) {
		// Follow starts at the selection and never stops early.
		if rg.Lines > 0 || rg.Limit > 0 {
			return usagef("log", "--follow reads to the end: give a start (--offset, --from-line or --tail), not a length")
		}
	}
	all := cc.Bool("all")
	if all && (follow || jsonOut(cc) || rg.Limit > 0 || rg.FromLine > 0 || rg.TailLines > 0 || rg.Grep != "") {
		return usagef("log", "--all prints raw bytes from --offset to the end: it cannot be combined with --limit, line selections, --grep, --follow or --json")
	}
	if multi(cc) {
		if follow {
			return usagef("log", "--follow reads one database: give one --db")
		}
		if _, err := r.sourceOf(cc, ref); err != nil {
			return err
		}
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	if all {
		return r.logAll(cc, c, ref, rg)
	}
	if follow {
		if !rg.ByteRange && rg.FromLine == 0 && rg.TailLines == 0 {
			rg.TailLines = 10
		}
		ctx, readerGone := whileReaderListens(cc.Context, r.stdout)
		err := c.Follow(ctx, ref, rg, r.stdout)
		if readerGone() {
			return &exitError{code: ExitReaderGone}
		}
		if err != nil {
			if cc.Context.Err() != nil {
				return &exitError{code: ExitInterrupted, msg: "interrupted; the job keeps running"}
			}
			return err
		}
		// The job ended: exit with its status, as wait and start --wait do.
		final, err := c.Get(cc.Context, ref)
		if err != nil {
			return err
		}
		return r.finish(final)
	}
	if searches(rg) {
		return r.search(cc, c, ref, rg)
	}
	out, err := c.Log(cc.Context, ref, rg)
	if err != nil {
		return err
	}
	if jsonOut(cc) {
		return r.printJSON(out)
	}
	if defaultRead(rg) && out.Start > 0 {
		if out, err = startAtLine(cc.Context, c, ref, out); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprint(r.stdout, out.Text); err != nil {
		return err
	}
	if s := omittedText(out, out.JobID, false); s != "" {
		fmt.Fprintln(r.stderr, s)
	}
	return nil
}

// logAll streams every retained byte from rg.Offset to the end of the
// output in pages, so memory stays bounded however large the log is.
func (r *runner) logAll(cc *ucli.Context, c *jobs.Client, ref string, rg jobs.Range) error {
	rg.ByteRange = true
	rg.Limit = jobs.MaxPageBytes
	var evicted, evictedTotal, droppedTotal int64
	for {
		out, err := c.Log(cc.Context, ref, rg)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(r.stdout, out.Text); err != nil {
			return err
		}
		evicted += out.Evicted
		evictedTotal, droppedTotal = out.EvictedTotal, out.DroppedTotal
		if out.NextOffset <= rg.Offset || out.NextOffset >= out.TotalBytes {
			break
		}
		rg.Offset = out.NextOffset
	}
	if evicted > 0 {
		fmt.Fprintf(r.stderr, "[%s of this range %s]\n", parse.FormatSize(evicted), gapWords(evictedTotal, droppedTotal))
	}
	return nil
}

// defaultRead reports whether rg is log's read without a selection: the
// last DefaultTailChars characters.
func defaultRead(rg jobs.Range) bool {
	return !rg.ByteRange && rg.FromLine == 0 && rg.Lines == 0 && rg.TailLines == 0 && rg.Tail == 0 && rg.Grep == "" && !rg.Clean
}

// startAtLine drops the partial first line of a tail that began mid-line,
// so that what is printed (and what a pipe such as head -1 takes first) is
// whole lines; the note on what was left out then counts it as earlier. A
// tail that is one partial line is kept whole: better part of a line than
// nothing.
func startAtLine(ctx context.Context, c *jobs.Client, ref string, out jobs.Output) (jobs.Output, error) {
	prev, err := c.Log(ctx, ref, jobs.Range{ByteRange: true, Offset: out.Start - 1, Limit: 1})
	if err != nil {
		return out, err
	}
	if prev.Text == "\n" || prev.Text == "" {
		// At a line start already, or the byte before is gone (evicted):
		// nothing tells where the line began.
		return out, nil
	}
	i := strings.IndexByte(out.Text, '\n')
	if i < 0 || i == len(out.Text)-1 {
		return out, nil
	}
	cut := int64(i + 1)
	out.Text = out.Text[cut:]
	out.Start += cut
	out.OmittedBefore += cut
	out.FirstLine++
	out.Lines--
	return out, nil
}
