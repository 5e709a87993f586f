package proc

import (
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of a process's start time in
// /proc/PID/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

// Since returns how long ago a process that started at start (clock ticks
// since boot, as StartTime returns) was started, by the kernel's boot-time
// clock: unlike the difference of two wall-clock times, it does not jump
// when the system clock is set. It reports false when it cannot tell. It
// reads the clock (CLOCK_BOOTTIME, the clock of /proc/uptime) rather than
// a file: a listing asks it of every running job on its page.
func Since(start int64) (time.Duration, bool) {
	if start <= 0 {
		return 0, false
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	d := time.Duration(ts.Nano()) - time.Duration(start)*time.Second/clockTicks
	if d < 0 {
		return 0, false
	}
	return d, true
}
