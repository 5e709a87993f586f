package cli

// Exit statuses of the jobs command. wait and start --wait/--yield exit
// with the job's own status instead (see jobExitCode).
const (
	// ExitOK means the verb did what was asked.
	ExitOK = 0
	// ExitError means the verb failed: unknown job, supervisor unreachable,
	// survivors after a kill, database problem.
	ExitError = 1
	// ExitUsage means the command line was wrong: unknown verb or flag,
	// missing argument, malformed duration, size, regex or signal.
	ExitUsage = 2
	// ExitTimedOut means `jobs wait --timeout` passed while a job was
	// still running (the same code as timeout(1)).
	ExitTimedOut = 124
	// ExitNotHappened means `jobs wait --until`, `--idle` or `--input`
	// returned because the jobs ended without the condition happening: no
	// match, no silence, no prompt.
	ExitNotHappened = 125
	// ExitInterrupted means the command was interrupted (SIGINT) while
	// waiting or following; the job itself keeps running.
	ExitInterrupted = 130
	// ExitReaderGone means a follow (log -f, events -f) ended because its
	// reader went away (`jobs log -f ID | head -1`), as a process killed
	// by SIGPIPE would (128 + 13); the job keeps running.
	ExitReaderGone = 141
)
