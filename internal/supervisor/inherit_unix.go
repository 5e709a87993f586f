//go:build linux || darwin

package supervisor

import (
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs closes every descriptor above stderr that the process
// inherited from whoever started it. Go opens all of its own descriptors
// close-on-exec, so one without that flag came from the launcher: a shell
// redirection, a pipe of its caller. Held by a long-lived supervisor, and
// passed on to every job, such a descriptor keeps the caller's pipe open
// (a `… | cat` that waits for the supervisor to exit).
func closeInheritedFDs() {
	dir := "/dev/fd"
	if runtime.GOOS == "linux" {
		dir = "/proc/self/fd"
	}
	ents, err := os.ReadDir(dir) // its own descriptor is close-on-exec
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		unix.Close(fd)
	}
}
