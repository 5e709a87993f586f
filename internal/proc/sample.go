//go:build linux || darwin

package proc

import "time"

// Sample is what a job's live processes use at one moment, summed over
// the processes of its group proven the job's (see Target): the main
// process and the members of its process group started within its life.
// A process that left the group (setsid) is not summed: finding it would
// cost a read of every newer process's environment, and a listing samples
// every running job.
type Sample struct {
	// Processes counts the live processes summed.
	Processes int
	// CPU is the CPU time (user and system) they used, and that of the
	// children they waited for.
	CPU time.Duration
	// RSSKB is their resident memory now, in KiB.
	RSSKB int64
}

// member reports whether info is one of t's processes for a sample: its
// main process, or a live member of its group started within its life
// while the group's leader, if alive, is the main process (leaderOK).
func (t Target) member(info Info, leaderOK bool) bool {
	if t.PIDStart == 0 || info.Dead() {
		return false
	}
	if info.PID == t.PID && info.StartTime == t.PIDStart {
		return true
	}
	return leaderOK && t.PGID > 1 && info.PGID == t.PGID &&
		info.StartTime >= t.PIDStart && (t.EndTicks == 0 || info.StartTime <= t.EndTicks)
}
