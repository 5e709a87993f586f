package jobs

import (
	"context"
	"time"

	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/supervisor"
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

// Resources reports the resource usage of job ref. A job that runs (or
// was lost with processes still alive) is sampled from the kernel: its
// processes proven the job's, as kill finds them. A read, it changes
// nothing. Where the kernel cannot be asked (darwin), a running job has
// Live false and zero figures.
func (c *Client) Resources(ctx context.Context, ref string) (Resources, error) {
	if err := c.check(ctx); err != nil {
		return Resources{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return Resources{}, err
	}
	r := Resources{MemTotalKB: MemTotalKB()}
	if j.Status == vocab.StatusRunning || j.Status == vocab.StatusLost {
		t := supervisor.TargetOf(j)
		if s, ok := proc.SampleOf(t); ok && (j.Status == vocab.StatusRunning || s.Processes > 0) {
			r.Live, r.At, r.Processes, r.CPU, r.RSSKB = true, time.Now(), s.Processes, s.CPU, s.RSSKB
			return r, nil
		}
	}
	v := fromDB(j, time.Now())
	r.CPU, r.RSSKB = v.UserCPU+v.SysCPU, v.MaxRSSKB
	return r, nil
}

// MemTotalKB is the machine's memory in KiB, 0 when unknown.
func MemTotalKB() int64 { return proc.MemTotalKB() }
