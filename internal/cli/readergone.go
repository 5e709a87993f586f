package cli

import (
	"context"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// whileReaderListens returns a context that also ends when out is a pipe
// or a socket whose reader has gone, and a function that says whether
// that is why it ended. A follow of a quiet job writes nothing, so it
// would never meet the broken pipe that ends `tail -f | head -1`'s tail:
// `jobs log -f ID | head -1` would wait for the job's next output, for
// ever. The kernel reports the gone reader to poll(2) as POLLERR (a pipe)
// or POLLHUP (a socket) without a write. Anything else (a terminal, a
// file, a writer that is not a file) is left alone.
func whileReaderListens(ctx context.Context, out io.Writer) (context.Context, func() bool) {
	f, ok := out.(*os.File)
	never := func() bool { return false }
	if !ok {
		return ctx, never
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return ctx, never
	}
	ctx, cancel := context.WithCancel(ctx)
	var gone atomic.Bool
	fd := int32(f.Fd())
	go func() {
		// Blocks one thread until the reader goes or the process ends;
		// a follow is the last thing its command does.
		for ctx.Err() == nil {
			fds := []unix.PollFd{{Fd: fd}}
			n, err := unix.Poll(fds, 1000)
			if err == unix.EINTR || n == 0 {
				continue
			}
			if err != nil {
				return
			}
			if fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
				gone.Store(true)
				cancel()
				return
			}
		}
	}()
	return ctx, func() bool { return gone.Load() }
}
