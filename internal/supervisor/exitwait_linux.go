package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once process pid has exited, without reaping it, so
// that the caller's Wait then returns at once. It waits in the netpoller
// on a pidfd: os.Process.Wait alone blocks a thread in waitid for the
// whole life of the child, and a supervisor running 100 jobs held 100 OS
// threads that way. When the kernel cannot watch the process like this
// (no pidfd), it returns at once and the caller's Wait blocks as before.
//
// pid must be a child not yet waited for, so that it cannot be reused.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) {
		// Before Linux 5.10: no flag at open, but the descriptor can still
		// be made non-blocking, which is all the netpoller needs.
		if fd, err = unix.PidfdOpen(pid, 0); err == nil {
			err = unix.SetNonblock(fd, true)
			if err != nil {
				unix.Close(fd)
			}
		}
	}
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd becomes readable when its process exits. Each check asks
	// the kernel (WNOHANG: info is filled only for a child that has
	// exited, Signo stays 0 otherwise) rather than trusting the first
	// readiness, which the netpoller may have seen before this read began.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}
