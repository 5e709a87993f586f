package supervisor

import (
	"syscall"

	"github.com/agentjobs/jobs/internal/proc"
)

// intoCgroup makes the process attr starts begin its life in cg (clone3
// with CLONE_INTO_CGROUP): there is no moment at which it, or a child it
// forks at once, is outside.
func intoCgroup(attr *syscall.SysProcAttr, cg *proc.Cgroup) {
	attr.UseCgroupFD, attr.CgroupFD = true, cg.FD
}
