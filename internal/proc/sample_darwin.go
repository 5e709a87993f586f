package proc

import (
	"time"

	"golang.org/x/sys/unix"
)

// sampleSupported: the per-process usage of another process needs
// proc_pidinfo (libproc), which this build does not call.
const sampleSupported = false

func usageOf(int, int64) (time.Duration, int64, bool) { return 0, 0, false }

// MemTotalKB is the machine's memory (hw.memsize), 0 when unknown.
func MemTotalKB() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n / 1024)
}
