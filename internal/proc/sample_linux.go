package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is one process's identity and what it used.
type usage struct {
	Info
	cpu   time.Duration
	rssKB int64
}

// SampleAll samples each of ts (see Sample) in one walk of /proc, however
// many there are. It reports false when /proc cannot be listed.
func SampleAll(ts []Target) ([]Sample, bool) {
	out := make([]Sample, len(ts))
	if len(ts) == 0 {
		return out, true
	}
	all, err := pids()
	if err != nil {
		return nil, false
	}
	byGroup := map[int][]int{} // group → the targets it may hold
	for i, t := range ts {
		if t.ThisBoot() && t.PIDStart != 0 {
			byGroup[t.PGID] = append(byGroup[t.PGID], i)
			if t.PID != t.PGID {
				byGroup[t.PID] = append(byGroup[t.PID], i) // a main process outside its group
			}
		}
	}
	var found []usage
	for _, pid := range all {
		u, ok := readUsage(pid)
		if !ok {
			continue
		}
		if _, mine := byGroup[u.PGID]; mine {
			found = append(found, u)
		} else if _, mine := byGroup[u.PID]; mine {
			found = append(found, u)
		}
	}
	// A group whose leader lives and is not the job's main process is a
	// reused group id: none of its members is the job's for being in it.
	leaderOK := make([]bool, len(ts))
	for i, t := range ts {
		leaderOK[i] = true
		for _, u := range found {
			if u.PID == t.PGID && t.PGID == t.PID && u.StartTime != t.PIDStart {
				leaderOK[i] = false
			}
		}
	}
	for _, u := range found {
		seen := map[int]bool{}
		for _, i := range append(byGroup[u.PGID], byGroup[u.PID]...) {
			if seen[i] || !ts[i].member(u.Info, leaderOK[i]) {
				continue
			}
			seen[i] = true
			out[i].Processes++
			out[i].CPU += u.cpu
			out[i].RSSKB += u.rssKB
		}
	}
	return out, true
}

// readUsage reads pid's identity, CPU time (its own and its waited-for
// children's: /proc/PID/stat fields 14-17) and resident set (field 24, in
// pages) from one read of its stat file.
func readUsage(pid int) (usage, bool) {
	var buf [1024]byte
	b, err := readSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return usage{}, false
	}
	info, err := parseStat(b)
	if err != nil {
		return usage{}, false
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 24-3+1 {
		return usage{}, false
	}
	var ticks int64
	for n := 14; n <= 17; n++ {
		v, err := strconv.ParseInt(fields[n-3], 10, 64)
		if err != nil {
			return usage{}, false
		}
		ticks += max(v, 0)
	}
	pages, err := strconv.ParseInt(fields[24-3], 10, 64)
	if err != nil {
		return usage{}, false
	}
	return usage{Info: info, cpu: time.Duration(ticks) * time.Second / clockTicks, rssKB: max(pages, 0) * int64(os.Getpagesize()) / 1024}, true
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
