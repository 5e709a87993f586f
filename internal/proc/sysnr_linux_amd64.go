package proc

import "golang.org/x/sys/unix"

// amd64 keeps the pre-ppoll syscalls; glibc and Go still use some of them.
func init() {
	pollSyscalls[unix.SYS_POLL] = true
	selectSyscalls[unix.SYS_SELECT] = true
	epollSyscalls[unix.SYS_EPOLL_WAIT] = true
}
