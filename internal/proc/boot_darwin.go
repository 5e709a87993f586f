package proc

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

var bootID = sync.OnceValue(func() string {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return ""
	}
	return strconv.FormatInt(tv.Sec, 10) + "." + strconv.FormatInt(int64(tv.Usec), 10)
})

// BootID returns an id of the current boot of this machine (darwin: the
// boot time, kern.boottime), or "" when it cannot be read. Pids and start
// times are meaningful only within one boot: a job recorded in another boot
// names no process now, whatever its pid.
func BootID() string { return bootID() }

// Now returns the current time on the clock StartTime uses: microseconds
// since the epoch on darwin.
func Now() int64 { return time.Now().UnixMicro() }
