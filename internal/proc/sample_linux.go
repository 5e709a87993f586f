package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// sampleSupported: /proc has what SampleOf sums.
const sampleSupported = true

// usageOf reads pid's CPU time (its own and its waited-for children's:
// /proc/PID/stat fields 14-17) and resident set (field 24, in pages), if
// pid is still the process that started at start.
func usageOf(pid int, start int64) (time.Duration, int64, bool) {
	var buf [1024]byte
	b, err := readSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return 0, 0, false
	}
	closing := bytes.LastIndexByte(b, ')')
	if closing < 0 {
		return 0, 0, false
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(string(b[closing+1:]))
	if len(fields) < 24-3+1 {
		return 0, 0, false
	}
	if st, err := strconv.ParseInt(fields[22-3], 10, 64); err != nil || st != start {
		return 0, 0, false
	}
	var ticks int64
	for n := 14; n <= 17; n++ {
		v, err := strconv.ParseInt(fields[n-3], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += max(v, 0)
	}
	pages, err := strconv.ParseInt(fields[24-3], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return time.Duration(ticks) * time.Second / clockTicks, max(pages, 0) * int64(os.Getpagesize()) / 1024, true
}

// MemTotalKB is the machine's memory (MemTotal in /proc/meminfo), 0 when
// unknown.
func MemTotalKB() int64 {
	b, err := os.ReadFile(procRoot + "/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
