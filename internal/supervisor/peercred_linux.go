package supervisor

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid and pid of the process at the other end of a
// unix socket connection, as the kernel recorded them when it connected
// (SO_PEERCRED): a peer cannot forge them.
func peerCred(c net.Conn) (uid, pid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, 0, fmt.Errorf("peer credentials: not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return -1, 0, fmt.Errorf("peer credentials: %w", serr)
	}
	return int(cred.Uid), int(cred.Pid), nil
}
