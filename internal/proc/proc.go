//go:build linux || darwin

package proc

import (
	"os"
	"syscall"
	"time"
)

// Info is what the kernel says about one process at one moment.
type Info struct {
	PID, PPID, PGID, SID int
	// State is the one-letter scheduler state: R running, S sleeping, D
	// uninterruptible, T stopped, t traced, Z zombie, X dead (Linux letters;
	// darwin states are mapped onto them).
	State byte
	// StartTime identifies the process together with its pid. On Linux it is
	// /proc/PID/stat field 22 (clock ticks since boot); on darwin it is
	// microseconds since the epoch. Compare it only with values from the same
	// machine.
	StartTime int64
	// Comm is the command name the kernel keeps (at most 15 bytes on Linux).
	Comm string
	// Exiting is set once the process has begun to exit (Linux: PF_EXITING
	// in /proc/PID/stat's flags): it never runs again, but it is not a
	// zombie yet, and its environment may already be unreadable.
	Exiting bool
}

// Dead reports whether the process has exited or is exiting, even if its
// parent has not reaped it yet.
func (i Info) Dead() bool { return i.State == 'Z' || i.State == 'X' || i.Exiting }

// Alive reports whether pid exists, has the given start time and is not a
// zombie. A pid that was reused by another process is not alive, so a caller
// that checks Alive before acting never acts on a stranger.
func Alive(pid int, start int64) bool {
	if pid <= 0 {
		return false
	}
	info, err := Inspect(pid)
	if err != nil {
		return false
	}
	return info.StartTime == start && !info.Dead()
}

// Target names the processes of one job for KillTree, Signal, CountAlive and
// WaitingForInput.
//
// A process is the job's only when that is proven: it carries EnvKey=EnvValue
// in its environment, or it is the main process (PID with start time
// PIDStart), or it is a member of the group PGID that started within the
// job's life (not before PIDStart, not after EndTicks) while the group's
// leader, if it still exists, is the main process. And all of that only on
// the boot the job was recorded in. Nothing else is signalled or counted, so
// a pid or group id that was reused after the job's processes ended names
// nothing.
type Target struct {
	// PGID is the job's process group; 0 means none. The group is
	// signalled as a whole only when every live member of it is proven,
	// and never when it is the caller's or in ExcludeGroups.
	PGID int
	// PID and PIDStart are the job's main process. Without a start time
	// neither the main process nor the group can be told apart from a
	// stranger that reused their ids, so only tagged processes count.
	PID      int
	PIDStart int64
	// EndTicks is when the job ended, on the clock of Now; 0 while it
	// runs. A group member that started later joined a reused group id.
	EndTicks int64
	// BootID is the boot the job ran in (see BootID). When set and not the
	// current boot, nothing is the job's. Empty means not recorded.
	BootID string
	// EndUnknown says EndTicks is not when the job's processes ended but
	// when someone noticed they had lost their supervisor (a lost job).
	// The group may have emptied and its id been reused in between, so
	// once the main process is gone, membership of the group proves
	// nothing: only the tag or the cgroup do.
	EndUnknown bool
	// Cgroup is the directory of the job's own cgroup (see NewCgroup);
	// every process in it is the job's, whatever its group or
	// environment. Empty means none.
	Cgroup string
	// EnvKey and EnvValue tag the job's processes (JOBS_ID=<id>); processes
	// carrying exactly EnvKey=EnvValue in their environment belong to the job
	// even if they left its group. Empty EnvKey disables the scan.
	EnvKey, EnvValue string
	// NotEnvKey, when set, unmarks tagged processes: one that also
	// carries NotEnvKey=EnvValue is not the job's. A job's on_exit hook
	// sees the job's tag, and runs once the job has ended, possibly while
	// a kill of the job still sweeps its last processes.
	NotEnvKey string
	// Exclude lists pids that are never signalled, for example the client
	// that asked for the kill. The caller's own pid and process group are
	// always excluded.
	Exclude []int
	// ExcludeGroups lists process groups none of whose members is ever
	// signalled, for example the supervisors' and the client's.
	ExcludeGroups []int
}

// Usage is the resource usage of a finished process.
type Usage struct {
	UserCPU, SysCPU time.Duration
	MaxRSSKB        int64
}

// UsageOf returns the resource usage recorded in a finished process's state.
// It counts the process and the descendants it waited for; a grandchild that
// was orphaned is not included. It returns the zero Usage for nil.
func UsageOf(ps *os.ProcessState) Usage {
	if ps == nil {
		return Usage{}
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}
	}
	return UsageFromRusage(ru)
}

// UsageFromRusage converts a kernel rusage into Usage, normalising the
// maximum resident set size to KiB (Linux reports KiB, darwin bytes).
func UsageFromRusage(ru *syscall.Rusage) Usage {
	if ru == nil {
		return Usage{}
	}
	return Usage{
		UserCPU:  time.Duration(ru.Utime.Nano()),
		SysCPU:   time.Duration(ru.Stime.Nano()),
		MaxRSSKB: int64(ru.Maxrss) / maxRSSPerKB,
	}
}
