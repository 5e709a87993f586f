package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

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

// zombieChildren lists the zombies whose parent is this process. It runs on
// every SIGCHLD, mostly for the exit of a job's main process, which its
// waiter has reaped by then; scanning all of /proc each time cost 0.2 s of
// a supervisor running 100 jobs (a /proc/N/stat read per process of the
// machine, per exit). So it first asks the kernel, in one waitid that takes
// nothing, whether any child is a zombie at all; only then does it list the
// children (from /proc/self/task/*/children where the kernel has it) and
// read the stat files of those children alone.
func zombieChildren() []Info {
	var si unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err == unix.ECHILD {
		return nil
	}
	peeked := 0
	if err == nil {
		if peeked = siginfoPID(&si); peeked == 0 {
			return nil // children, but none has exited
		}
	}
	self := os.Getpid()
	pids, err := childPIDs(self)
	if err != nil {
		found, err := scan(func(i Info) bool { return i.PPID == self && i.State == 'Z' }, "", "")
		if err != nil {
			return nil
		}
		return found
	}
	if peeked != 0 {
		// The children files may miss an entry while children exit.
		pids = append(pids, peeked)
	}
	var found []Info
	seen := make(map[int]bool, len(pids))
	for _, pid := range pids {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if info, err := Inspect(pid); err == nil && info.PPID == self && info.State == 'Z' {
			found = append(found, info)
		}
	}
	return found
}

// siginfoPID is si_pid of a siginfo filled in by waitid, 0 when no child
// was waitable (the kernel then leaves si_signo 0).
func siginfoPID(si *unix.Siginfo) int {
	if si.Signo != int32(unix.SIGCHLD) {
		return 0
	}
	// si_pid opens the union that follows si_signo, si_errno and si_code,
	// which is pointer-aligned: at 16 bytes on 64-bit targets, 12 on
	// 32-bit ones.
	off := 3 * unsafe.Sizeof(int32(0))
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 4 * unsafe.Sizeof(int32(0))
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(si), off)))
}

// childPIDs lists the children of every thread of this process.
func childPIDs(self int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(self) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread ended, or the kernel lacks the file
			}
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
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
