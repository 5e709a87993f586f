package jobs

import (
	"context"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Resources is what a job's processes use: sampled from the kernel while
// the job runs, else what was recorded when its main process ended.
type Resources struct {
	// Live reports a sample of the job's live processes, taken At. When
	// false the figures are the ones recorded at the end (Job.UserCPU,
	// Job.SysCPU, Job.MaxRSSKB), or zero when none were.
	Live bool
	At   time.Time
	// Processes counts the live processes sampled.
	Processes int
	// CPU is the CPU time used, user and system: by the live processes
	// and the children they waited for, or by the job to its end.
	CPU time.Duration
	// RSSKB is resident memory in KiB: of the live processes now, or the
	// largest the main process (and the children it waited for) reached.
	RSSKB int64
	// MemTotalKB is the machine's memory, to put RSSKB in proportion; 0
	// when unknown.
	MemTotalKB int64
}

// Resources reports the resource usage of jobs refs, in their order. A
// job that runs (or was lost with processes still alive) is sampled from
// the kernel: its main process and the members of its process group
// proven the job's, as kill finds them (a process that left the group is
// not summed), all jobs in one walk of the process table. Any other job
// has the figures recorded at its end. A read, it changes nothing. Where
// the kernel cannot be asked (darwin), a running job has Live false and
// zero figures. Errors: ErrNotFound for a ref that names no job.
func (c *Client) Resources(ctx context.Context, refs ...string) ([]Resources, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	out := make([]Resources, len(refs))
	var (
		targets []proc.Target
		at      []int
		lost    []bool
	)
	total := MemTotalKB()
	now := time.Now()
	for i, ref := range refs {
		j, err := c.find(ctx, ref)
		if err != nil {
			return nil, err
		}
		v := fromDB(j, now)
		out[i] = Resources{CPU: v.UserCPU + v.SysCPU, RSSKB: v.MaxRSSKB, MemTotalKB: total}
		if j.Status == vocab.StatusRunning || j.Status == vocab.StatusLost {
			targets = append(targets, control.TargetOf(j))
			at = append(at, i)
			lost = append(lost, j.Status == vocab.StatusLost)
		}
	}
	samples, ok := proc.SampleAll(targets)
	if !ok {
		for _, i := range at {
			out[i].CPU, out[i].RSSKB = 0, 0
		}
		return out, nil
	}
	for k, s := range samples {
		if lost[k] && s.Processes == 0 {
			continue // nothing of it runs: what was recorded stands
		}
		out[at[k]] = Resources{Live: true, At: now, Processes: s.Processes, CPU: s.CPU, RSSKB: s.RSSKB, MemTotalKB: total}
	}
	return out, nil
}

// MemTotalKB is the machine's memory in KiB, 0 when unknown.
func MemTotalKB() int64 { return proc.MemTotalKB() }
