package cli

import (
	"errors"
	"strconv"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) eventsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "events",
		Usage: "print the event stream as NDJSON, one event per line",
		Description: "Each line is one event; its \"id\" is the cursor: pass the last one seen to --since to\n" +
			"get every later event exactly once, across supervisor restarts. -f keeps following.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "since", Usage: "only events after `CURSOR` (an event id)"},
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new events until interrupted"},
			&ucli.StringFlag{Name: "job", Usage: "only the events of job `ID`"},
			&ucli.BoolFlag{Name: "all-scopes", Usage: "include every scope's events"},
		},
		Action: r.events,
	}
}

func (r *runner) events(cc *ucli.Context) error {
	const verb = "events"
	if cc.Args().Present() {
		return usagef(verb, "events takes no arguments (use --job ID for one job)")
	}
	var o jobs.EventOptions
	if cc.IsSet("since") {
		n, err := strconv.ParseInt(cc.String("since"), 10, 64)
		if err != nil || n < 0 {
			return usagef(verb, "invalid --since %s: want an event id (a number ≥ 0)", quoted(cc.String("since")))
		}
		o.Since = n
	}
	o.Follow = cc.Bool("follow")
	o.AllScopes = cc.Bool("all-scopes")
	if cc.IsSet("job") && cc.String("job") == "" {
		return usagef(verb, "empty --job")
	}
	if multi(cc) {
		return r.eventsMulti(cc, o)
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	ctx := cc.Context
	if ref := cc.String("job"); ref != "" {
		// Events outlive their job: a deleted job's full id still selects
		// its history; a prefix or a name must match a job that exists.
		j, err := c.Get(ctx, ref)
		switch {
		case err == nil:
			o.JobID = j.ID
		case errors.Is(err, jobs.ErrNotFound) && len(ref) == jobs.IDLength:
			o.JobID = ref
		default:
			return err
		}
	}
	readerGone := func() bool { return false }
	if o.Follow {
		ctx, readerGone = whileReaderListens(ctx, r.stdout)
	}
	for ev, err := range c.Events(ctx, o) {
		if err != nil {
			if readerGone() {
				return &exitError{code: ExitReaderGone}
			}
			if o.Follow && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // interrupted -f: a normal end
			}
			return err
		}
		if err := r.printLine(ev); err != nil {
			return err
		}
		if f, ok := r.stdout.(interface{ Sync() error }); ok && o.Follow {
			_ = f.Sync()
		}
	}
	if readerGone() {
		return &exitError{code: ExitReaderGone}
	}
	return nil
}
