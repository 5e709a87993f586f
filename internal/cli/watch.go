package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// Bounds of list --watch's sleep between redraws. It wakes when the
// database changes (Client.Changes: inotify on Linux), so a quiet database
// costs nothing; the bounds only refresh the runtime and age columns.
const (
	watchRunning = 2 * time.Second  // a job runs: its runtime moves
	watchIdle    = 60 * time.Second // nothing runs: only the ages move
	// watchMinGap spaces redraws while a job floods its output, which
	// changes the database many times a second.
	watchMinGap = 250 * time.Millisecond
)

// watchList redraws list's table each time the database changes, until
// interrupted. On a terminal each frame replaces the last; into a pipe
// the frames follow each other, each after its header line.
func (r *runner) watchList(cc *ucli.Context, f jobs.Filter, tail int64) error {
	const verb = "list"
	switch {
	case jsonOut(cc):
		return usagef(verb, "--watch draws a table: it cannot be combined with --json")
	case multi(cc):
		return usagef(verb, "--watch reads one database: give one --db")
	case cc.IsSet("cursor"):
		return usagef(verb, "--watch shows the newest jobs: it cannot be combined with --cursor")
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	ctx := cc.Context
	ch := c.Changes()
	defer ch.Close()
	term := isTerminal(r.stdoutFile())
	pt := r.paint()
	for {
		drawn := time.Now()
		items, page, err := r.listOne(cc, f, tail)
		if err != nil {
			return err
		}
		var b strings.Builder
		if term {
			b.WriteString("\x1b[H\x1b[2J") // home, clear: the frame replaces the last
		}
		b.WriteString(pt.dim(fmt.Sprintf("jobs list --watch · scope %s · %s · Ctrl-C to stop", shown(c.Scope()), drawn.Format("15:04:05"))))
		b.WriteString("\n")
		running := false
		if len(items) == 0 {
			b.WriteString("no jobs\n")
		} else {
			b.WriteString(formatList(items, drawn, pt, f.AllScopes, false, commandWidth(r.stdoutFile())))
			if page.More > 0 {
				b.WriteString(pt.dim(fmt.Sprintf("… and %s more\n", formatCount(page.More))))
			}
		}
		for _, it := range items {
			running = running || !it.Status.Terminal()
		}
		if !term {
			b.WriteString("\n")
		}
		if _, err := fmt.Fprint(r.stdout, b.String()); err != nil {
			return err
		}
		period := watchIdle
		if running {
			period = watchRunning
		}
		if err := ch.Wait(ctx, period); err != nil {
			return nil // interrupted: the way out of a watch
		}
		if gap := watchMinGap - time.Since(drawn); gap > 0 {
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}
