//go:build linux || darwin

package proc

import "time"

// Sample is what a job's live processes use at one moment, summed over
// every process proven the job's (see Target).
type Sample struct {
	// Processes counts the live processes summed.
	Processes int
	// CPU is the CPU time (user and system) they used, and that of the
	// children they waited for.
	CPU time.Duration
	// RSSKB is their resident memory now, in KiB.
	RSSKB int64
}

// SampleOf sums the resource usage of t's live processes. It reports false
// where the kernel cannot be asked (not Linux).
func SampleOf(t Target) (Sample, bool) {
	live, _, err := jobProcs(t)
	if err != nil {
		return Sample{}, false
	}
	var s Sample
	for pid, info := range live {
		cpu, rss, ok := usageOf(pid, info.StartTime)
		if !ok {
			if !sampleSupported {
				return Sample{}, false
			}
			continue // gone meanwhile
		}
		s.Processes++
		s.CPU += cpu
		s.RSSKB += rss
	}
	return s, true
}
