package proc

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of a process's start time in
// /proc/PID/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

// Since returns how long ago a process that started at start (clock ticks
// since boot, as StartTime returns) was started, by the kernel's boot-time
// clock: unlike the difference of two wall-clock times, it does not jump
// when the system clock is set. It reports false when it cannot tell.
func Since(start int64) (time.Duration, bool) {
	if start <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(procRoot + "/uptime")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, false
	}
	d := time.Duration(up*float64(time.Second)) - time.Duration(start)*time.Second/clockTicks
	if d < 0 {
		return 0, false
	}
	return d, true
}
