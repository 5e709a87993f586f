package proc

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): orphaned descendants are re-parented to it
// instead of to PID 1. On machines whose PID 1 never reaps, that is the only
// way a job's double-forked grandchildren do not stay zombies forever; run a
// Reaper to reap them.
func SetSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	return nil
}

// zombieChildren lists the zombies whose parent is this process.
func zombieChildren() []Info {
	self := os.Getpid()
	found, err := scan(func(i Info) bool { return i.PPID == self && i.State == 'Z' }, "", "")
	if err != nil {
		return nil
	}
	return found
}

// reapZombie reaps pid if it is still the zombie child that started at
// start. The caller holds the Reaper's lock, so no owned child can appear
// under this pid in between; WNOHANG keeps a live child of the same pid from
// blocking the Reaper.
func reapZombie(pid int, start int64) (syscall.WaitStatus, bool) {
	info, err := Inspect(pid)
	if err != nil || info.State != 'Z' || info.PPID != os.Getpid() || info.StartTime != start {
		return 0, false
	}
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	if err != nil || got != pid {
		return 0, false
	}
	return syscall.WaitStatus(ws), true
}
