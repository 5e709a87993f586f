package proc

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// bootIDPath holds a random id the kernel draws at every boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// BootID returns an id of the current boot of this machine (the kernel's
// random boot_id), or "" when it cannot be read. Pids and start times are
// meaningful only within one boot: a job recorded in another boot names no
// process now, whatever its pid.
func BootID() string { return bootID() }

// Now returns the current time on the clock StartTime uses: clock ticks
// since boot (CLOCK_BOOTTIME, which the kernel also uses for process start
// times, so time spent suspended counts on both). It is 0 when the clock
// cannot be read.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return ts.Sec*clockTicks + ts.Nsec/(1e9/clockTicks)
}
