package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// queueStartFlags are the flags of start (and restart) that make a job
// wait: a queue, a priority in it, the jobs it comes after.
func queueStartFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "queue", Usage: "wait in queue `NAME` of the scope, which runs its jobs in order (jobs queue NAME --parallel N; 1 at a time when new)"},
		&ucli.IntFlag{Name: "priority", Usage: "start before the queue's jobs of lower `N` (default 0)"},
		&ucli.StringSliceFlag{Name: "after", Usage: "start once job `ID` (or name) has ended, whatever its result (repeatable)"},
		&ucli.StringSliceFlag{Name: "after-ok", Usage: "start once job `ID` (or name) has ended done; if it did not, this job fails (repeatable)"},
		&ucli.BoolFlag{Name: "no-queue", Usage: "refuse the start at the scope's running cap instead of queueing it"},
	}
}

// applyQueueFlags sets what queueStartFlags give on spec; only the flags
// given change it (restart keeps the old job's queue otherwise).
func applyQueueFlags(cc *ucli.Context, verb string, spec *jobs.Spec) error {
	if cc.IsSet("queue") {
		spec.Queue = cc.String("queue")
		if strings.TrimSpace(spec.Queue) == "" {
			return usagef(verb, "empty --queue")
		}
	}
	if cc.IsSet("priority") {
		spec.Priority = cc.Int("priority")
	}
	for _, f := range []struct {
		name string
		to   *[]string
	}{{"after", &spec.After}, {"after-ok", &spec.AfterOK}} {
		for _, v := range cc.StringSlice(f.name) {
			for _, ref := range strings.Split(v, ",") {
				if ref = strings.TrimSpace(ref); ref == "" {
					return usagef(verb, "empty --%s", f.name)
				}
				*f.to = append(*f.to, ref)
			}
		}
	}
	if cc.IsSet("no-queue") {
		spec.NoQueue = cc.Bool("no-queue")
	}
	return nil
}

// queuedNote says on stderr why a job just started waits, and how it goes
// on: its id alone goes to stdout, as for any start.
func (r *runner) queuedNote(j jobs.Job, spec jobs.Spec) {
	if j.Status != jobs.StatusQueued {
		return
	}
	switch {
	case j.Queue != "":
		r.note("job %s queued in %s", j.ID, quoted(j.Queue))
	case len(spec.After) > 0 || len(spec.AfterOK) > 0:
		r.note("job %s queued: it starts when the jobs it comes after have ended", j.ID)
	default:
		r.note("job %s queued: the scope is at its running cap; it starts when a running job ends (--no-queue refuses instead)", j.ID)
	}
}

func (r *runner) queueCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "queue",
		Usage:     "list the scope's queues, or change one",
		ArgsUsage: "[NAME]",
		Description: "Without arguments, lists the scope's queues with how many of their jobs run and wait.\n" +
			"With NAME and flags, creates or changes that queue: --parallel N runs N of its jobs at\n" +
			"once, --pause stops it from starting more, --resume lets it go on. --front JOB makes a\n" +
			"queued job the next of its queue to start.",
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "parallel", Usage: "run `N` of the queue's jobs at once"},
			&ucli.BoolFlag{Name: "pause", Usage: "start none of the queue's jobs until --resume"},
			&ucli.BoolFlag{Name: "resume", Usage: "start the queue's jobs again"},
			&ucli.StringFlag{Name: "front", Usage: "make queued job `ID|NAME` the next of its queue to start"},
		},
		Action: r.queue,
	}
}

func (r *runner) queue(cc *ucli.Context) error {
	const verb = "queue"
	pos := args(cc)
	if len(pos) > 1 {
		return usagef(verb, "one queue at a time")
	}
	var u jobs.QueueUpdate
	if cc.IsSet("parallel") {
		n := cc.Int("parallel")
		if n < 1 {
			return usagef(verb, "--parallel must be at least 1")
		}
		u.Parallel = &n
	}
	if cc.Bool("pause") && cc.Bool("resume") {
		return usagef(verb, "give --pause or --resume, not both")
	}
	if cc.Bool("pause") || cc.Bool("resume") {
		p := cc.Bool("pause")
		u.Paused = &p
	}
	changes := u.Parallel != nil || u.Paused != nil
	if changes && len(pos) == 0 {
		return usagef(verb, "name the queue to change")
	}
	if len(pos) == 1 && strings.TrimSpace(pos[0]) == "" {
		return usagef(verb, "empty queue name")
	}
	c, err := r.openClient(cc, !changes && !cc.IsSet("front"))
	if err != nil {
		return err
	}
	ctx := cc.Context
	if cc.IsSet("front") {
		j, err := c.MoveToFront(ctx, cc.String("front"))
		if err != nil {
			return err
		}
		if jsonOut(cc) {
			return r.printJSON(j)
		}
		fmt.Fprintf(r.stdout, "%s is next in %s\n", j.ID, queueName(j.Queue))
		if !changes && len(pos) == 0 {
			return nil
		}
	}
	var qs []jobs.Queue
	if changes {
		q, err := c.SetQueue(ctx, pos[0], u)
		if err != nil {
			return err
		}
		qs = []jobs.Queue{q}
	} else {
		all, err := c.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range all {
			if len(pos) == 0 || q.Name == pos[0] {
				qs = append(qs, q)
			}
		}
		if len(pos) == 1 && len(qs) == 0 {
			return fmt.Errorf("queue %s not found", quoted(pos[0]))
		}
	}
	if jsonOut(cc) {
		return r.printJSON(map[string]any{"queues": qs})
	}
	if len(qs) == 0 {
		fmt.Fprintln(r.stdout, "no queues")
		return nil
	}
	tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARALLEL\tRUNNING\tQUEUED\tSTATE")
	for _, q := range qs {
		par, state := strconv.Itoa(q.Parallel), "running"
		if q.Name == "" {
			par = "-"
		}
		if q.Paused {
			state = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", queueName(q.Name), par, q.Running, q.Queued, state)
	}
	return tw.Flush()
}

// queueName shows the scope's own queue as "(scope)".
func queueName(name string) string {
	if name == "" {
		return "(scope)"
	}
	return name
}

func (r *runner) restartCommand() *ucli.Command {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "name", Usage: "give the new job `NAME` instead of the old one's"},
		&ucli.BoolFlag{Name: "replace", Usage: "end the running job with the same name first"},
		&ucli.StringFlag{Name: "cwd", Usage: "run in `DIR` instead of the old job's directory"},
		&ucli.StringSliceFlag{Name: "env", Usage: "add `KEY=VALUE` (or KEY with its value here) to the environment (repeatable)", KeepSpace: true},
		&ucli.StringSliceFlag{Name: "label", Usage: "label the new job `TEXT` (repeatable, as for start)", KeepSpace: true},
		&ucli.StringFlag{Name: "timeout", Usage: "maximum runtime `DUR`, 0 for none"},
		&ucli.StringFlag{Name: "ttl", Usage: "keep the finished job `DUR` after its last access, 0 for ever"},
		&ucli.BoolFlag{Name: "wait", Usage: "stream the output and exit with the new job's status"},
	}
	return &ucli.Command{
		Name:      "restart",
		Usage:     "start a new job like an old one and print its id",
		ArgsUsage: "ID|NAME",
		Description: "Starts a new job with the old one's command, argv, directory, name, label, limits,\n" +
			"exit hook and queue; the variables it added (--env) take their values from this\n" +
			"environment, since values are never stored. Flags given here override. The old job\n" +
			"keeps its history; the new one records it (restarted_from).",
		Flags:  append(flags, queueStartFlags()...),
		Action: r.restart,
	}
}

func (r *runner) restart(cc *ucli.Context) error {
	const verb = "restart"
	ref, err := oneRef(cc)
	if err != nil {
		return err
	}
	// Only the flags given change the old job's spec.
	var edits []func(*jobs.Spec)
	if cc.IsSet("name") {
		name := cc.String("name")
		edits = append(edits, func(s *jobs.Spec) { s.Name = name })
	}
	if cc.IsSet("label") {
		label := joinLabels(cc.StringSlice("label"))
		edits = append(edits, func(s *jobs.Spec) { s.Label = label })
	}
	if cc.IsSet("cwd") {
		cwd := cc.String("cwd")
		if cwd == "" {
			return usagef(verb, "empty --cwd")
		}
		edits = append(edits, func(s *jobs.Spec) { s.Cwd = cwd })
	}
	if cc.Bool("replace") {
		edits = append(edits, func(s *jobs.Spec) { s.Replace = true })
	}
	for _, e := range cc.StringSlice("env") {
		if !strings.Contains(e, "=") {
			v, ok := os.LookupEnv(e)
			if !ok {
				return usagef(verb, "--env %s: not set in this environment", quoted(e))
			}
			e += "=" + v
		}
		edits = append(edits, func(s *jobs.Spec) { s.Env = append(s.Env, e) })
	}
	if cc.IsSet("timeout") {
		d, err := parseDuration(verb, "timeout", cc.String("timeout"))
		if err != nil {
			return err
		}
		edits = append(edits, func(s *jobs.Spec) { s.Timeout = noneIfZero(d) })
	}
	if cc.IsSet("ttl") {
		d, err := parseDuration(verb, "ttl", cc.String("ttl"))
		if err != nil {
			return err
		}
		edits = append(edits, func(s *jobs.Spec) { s.TTL = noneIfZero(d) })
	}
	var q jobs.Spec
	if err := applyQueueFlags(cc, verb, &q); err != nil {
		return err
	}
	edits = append(edits, func(s *jobs.Spec) {
		if cc.IsSet("queue") {
			s.Queue = q.Queue
		}
		if cc.IsSet("priority") {
			s.Priority = q.Priority
		}
		s.After, s.AfterOK, s.NoQueue = q.After, q.AfterOK, q.NoQueue
	})
	set := func(s *jobs.Spec) {
		for _, e := range edits {
			e(s)
		}
	}
	c, err := r.openClient(cc, true)
	if err != nil {
		return err
	}
	j, err := c.Restart(cc.Context, ref, set)
	if err != nil {
		return err
	}
	if j.Status == jobs.StatusFailed && j.StartedAt == nil {
		fmt.Fprintln(r.stdout, j.ID)
		return &exitError{code: jobExitCode(j), msg: fmt.Sprintf("job %s failed: %s", j.ID, oneLine(j.Reason))}
	}
	if cc.Bool("wait") {
		return r.waitAndShow(cc, c, j, 0)
	}
	if jsonOut(cc) {
		return r.printJSON(j)
	}
	fmt.Fprintln(r.stdout, j.ID)
	r.queuedNote(j, q)
	return nil
}
