//go:build !linux

package supervisor

import (
	"syscall"

	"github.com/agentjobs/jobs/internal/proc"
)

// intoCgroup does nothing where there are no cgroups.
func intoCgroup(*syscall.SysProcAttr, *proc.Cgroup) {}
