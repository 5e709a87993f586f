package cli

import (
	"fmt"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) clearCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "clear",
		Usage:       "drop a job's stored output",
		ArgsUsage:   "ID",
		Description: "Offsets stay absolute: the cleared bytes count as evicted.",
		Action:      r.clear,
	}
}

// clearResult is the JSON of jobs clear.
type clearResult struct {
	JobID   string `json:"id"`
	Cleared bool   `json:"cleared"`
	// Bytes is how much stored output the job had before.
	Bytes int64 `json:"bytes"`
}

func (r *runner) clear(cc *ucli.Context) error {
	ref, c, err := r.refAndClient(cc)
	if err != nil {
		return err
	}
	j, err := c.Get(cc.Context, ref)
	if err != nil {
		return err
	}
	if err := c.Clear(cc.Context, j.ID); err != nil {
		return err
	}
	stored := j.OutputBytes - j.EvictedBytes
	if jsonOut(cc) {
		return r.printJSON(clearResult{JobID: j.ID, Cleared: true, Bytes: stored})
	}
	fmt.Fprintf(r.stdout, "cleared %s of output of %s\n", parse.FormatSize(stored), j.ID)
	return nil
}

func (r *runner) rmCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "rm",
		Usage:       "delete a job, killing it first if it runs",
		ArgsUsage:   "ID",
		Description: "The job's output goes; its events stay in the audit trail.",
		Action:      r.rm,
	}
}

// rmResult is the JSON of jobs rm.
type rmResult struct {
	JobID   string `json:"id"`
	Removed bool   `json:"removed"`
	// Kill says what killing the job first did; AlreadyDone when it had
	// finished.
	Kill jobs.KillResult `json:"kill"`
}

func (r *runner) rm(cc *ucli.Context) error {
	ref, c, err := r.refAndClient(cc)
	if err != nil {
		return err
	}
	res, err := c.Remove(cc.Context, ref)
	if err != nil {
		return err
	}
	id := res.JobID
	if id == "" {
		id = ref
	}
	if jsonOut(cc) {
		return r.printJSON(rmResult{JobID: id, Removed: true, Kill: res})
	}
	if res.AlreadyDone || len(res.Signalled) == 0 {
		fmt.Fprintf(r.stdout, "removed %s\n", id)
	} else {
		fmt.Fprintf(r.stdout, "killed and removed %s: signalled %s\n", id, pidList(res.Signalled))
	}
	if len(res.Survivors) > 0 {
		return &exitError{code: ExitError, msg: fmt.Sprintf("%s survived SIGKILL: %s", plural(int64(len(res.Survivors)), "process", "processes"), pidList(res.Survivors))}
	}
	return nil
}

func (r *runner) gcCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "gc",
		Usage: "run the janitor now: mark orphaned jobs lost, delete expired jobs and old events",
		Description: "--vacuum then rewrites the database compactly and turns on incremental auto-vacuum\n" +
			"(new databases have it), so that the space of deleted jobs goes back to the file system.\n" +
			"Other writers wait while it runs; it needs free space about the size of the database.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "vacuum", Usage: "also rewrite the database compactly (see above)"},
		},
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("gc", "gc takes no arguments")
			}
			c, err := r.client(cc)
			if err != nil {
				return err
			}
			res, err := c.GC(cc.Context)
			if err != nil {
				return err
			}
			var vac *jobs.VacuumResult
			if cc.Bool("vacuum") {
				v, err := c.Vacuum(cc.Context)
				if err != nil {
					return err
				}
				vac = &v
			}
			if jsonOut(cc) {
				return r.printJSON(struct {
					jobs.GCResult
					Vacuum *jobs.VacuumResult `json:"vacuum,omitempty"`
				}{res, vac})
			}
			fmt.Fprintf(r.stdout, "deleted %s and %s; marked %s lost\n",
				plural(int64(res.Jobs), "expired job", "expired jobs"),
				plural(res.Events, "old event", "old events"),
				plural(int64(res.Lost), "job", "jobs"))
			if vac != nil {
				fmt.Fprintf(r.stdout, "vacuumed: %s before, %s after\n", parse.FormatSize(vac.Before), parse.FormatSize(vac.After))
			}
			return nil
		},
	}
}
