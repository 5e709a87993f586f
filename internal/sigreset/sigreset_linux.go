package sigreset

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Inherited returns the signals a child of this process would start with
// blocked and ignored, as bit masks (bit n-1 for signal n). A Go program
// starts children with the mask its threads run with (the mask it started
// with) and ignored dispositions kept.
func Inherited() (blocked, ignored uint64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			continue
		}
		switch k {
		case "SigBlk":
			blocked = n
		case "SigIgn":
			ignored = n
		}
	}
	return blocked, ignored
}

// Wrap makes cmd start through the shim when this process has a signal
// blocked or ignored, and returns the function to call once cmd.Start has
// returned (whether or not it failed): it reports the shim's failure to
// exec the command as cmd.Start would have (an *os.PathError), and nil
// once the command runs. After such a failure the shim has exited: the
// caller waits for it. Without a shim, the function returns nil.
func Wrap(cmd *exec.Cmd) (started func() error, err error) {
	if blocked, ignored := Inherited(); blocked == 0 && ignored == 0 {
		return func() error { return nil }, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	path, env := cmd.Path, cmd.Env
	if env == nil {
		env = os.Environ()
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, pw)
	cmd.Args = append([]string{shimArg0, strconv.Itoa(fd), path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	cmd.Env = append(withoutMarker(env), shimEnv+"=1")
	return func() error {
		pw.Close()
		defer pr.Close()
		var buf [4]byte
		n, _ := io.ReadFull(pr, buf[:])
		if n < len(buf) {
			return nil // the descriptor closed on exec: the command runs
		}
		return &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(binary.LittleEndian.Uint32(buf[:]))}
	}, nil
}

// shim resets the dispositions and the mask, then execs path with argv.
// It returns only when the exec failed, after writing its errno to the
// descriptor fd.
func shim(fd, path string, argv []string) int {
	runtime.LockOSThread()
	n, err := strconv.Atoi(fd)
	if err != nil {
		return 127
	}
	syscall.CloseOnExec(n)
	_, ignored := Inherited()
	for sig := 1; sig <= 64; sig++ {
		if ignored&(1<<(sig-1)) == 0 || sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		// SIG_DFL is 0, as are the flags, the restorer and the mask:
		// a zeroed struct sigaction on every architecture.
		var act [4]uint64
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
	var none unix.Sigset_t
	unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
	err = syscall.Exec(path, argv, withoutMarker(os.Environ()))
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EINVAL
	}
	var buf [4]byte
	binary.LittleEndian.PutUint32(buf[:], uint32(errno))
	f := os.NewFile(uintptr(n), "status")
	f.Write(buf[:])
	return 127
}
