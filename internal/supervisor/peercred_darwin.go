package supervisor

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid of the process at the other end of a unix
// socket connection, as the kernel recorded it when it connected
// (LOCAL_PEERCRED, what getpeereid reads): a peer cannot forge it. The pid
// is not known here (0).
func peerCred(c net.Conn) (uid, pid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, 0, fmt.Errorf("peer credentials: not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Xucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", serr)
	}
	return int(cred.Uid), 0, nil
}
