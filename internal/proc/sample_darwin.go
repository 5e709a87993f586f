package proc

import "golang.org/x/sys/unix"

// SampleAll is not available on darwin: another process's usage needs
// proc_pidinfo (libproc), which this build does not call.
func SampleAll(ts []Target) ([]Sample, bool) { return nil, false }

// MemTotalKB is the machine's memory (hw.memsize), 0 when unknown.
func MemTotalKB() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n / 1024)
}
