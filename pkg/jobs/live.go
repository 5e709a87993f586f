package jobs

import (
	"os"
	"strconv"
	"strings"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/vocab"
)

// addLiveFacts asks the kernel what the stored row cannot say: whether a
// process of the job is blocked reading its stdin, whether the job is
// stopped, and how many of its processes are still alive once the main one
// has exited or the job has ended. Only processes proven the job's count
// (proc.Target). full counts descendants of finished jobs too, which costs
// a scan of every process's environment; list asks it only for lost jobs.
// Without full, whether a running job waits for input is asked of the main
// thread of its main process only (proc.MainWaitsOnStdin, from the stat
// file read for the liveness check): a page of running jobs would
// otherwise read the files of every thread of every process in it.
// It returns true when it found that no process of a finished job is left,
// a fact the caller records so that later reads skip the scan.
func addLiveFacts(out *Job, j db.Job, full bool, cgroup func() string) (gone bool) {
	if j.PID == 0 {
		return false
	}
	t := control.TargetOf(j)
	if !t.ThisBoot() {
		return false // recorded before a reboot: none of its pids is it now
	}
	switch {
	case j.Status == vocab.StatusRunning:
		main, err := proc.Inspect(j.PID)
		mainAlive := err == nil && j.PIDStart != 0 && main.StartTime == j.PIDStart && !main.Dead()
		if mainAlive {
			// The main process stands for the job: pause stops the
			// whole group, and reading one stat file keeps poll cheap.
			out.Stopped = main.State == 'T'
		}
		if j.Stdin == vocab.StdinPipe && j.Mode != vocab.ModeTmux && mainAlive && !out.Stopped {
			switch {
			case full && j.Mode == vocab.ModePTY:
				// Blocked reading its terminal, which the
				// supervisor's writes feed.
				out.WaitingForInput = proc.WaitingForTTY(j.PID, t)
			case full:
				out.WaitingForInput = proc.WaitingForInput(j.PID, stdinInode(j.PID), t)
			default:
				out.WaitingForInput = proc.MainWaitsOnStdin(main)
			}
		}
		if !mainAlive {
			out.MainExited = true
			t.Cgroup = cgroup()
			out.Descendants, out.Stopped = control.Census(t)
		}
	case j.Status.Terminal() && j.SurvivorsGone:
		out.Descendants = 0
	case j.Status == vocab.StatusLost, full && j.Status.Terminal():
		t.Cgroup = cgroup()
		out.Descendants, out.Stopped = control.Census(t)
		return out.Descendants == 0
	}
	return false
}

// stdinInode reads which pipe the main process has as stdin. The link is
// readable by any process of the same user, so readers need no supervisor.
func stdinInode(pid int) uint64 {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/0")
	if err != nil || !strings.HasPrefix(link, "pipe:[") {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "pipe:["), "]"), 10, 64)
	return n
}
