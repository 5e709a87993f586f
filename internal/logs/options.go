package logs

import "os"

// CheckpointEnv names the setting that leaves checkpoints to another
// process: JOBS_CHECKPOINT=off in the environment of a supervisor (and of
// the command that starts it) makes it never copy the WAL into the
// database file. It is for a database that Litestream replicates, which
// checkpoints itself; without Litestream the WAL would only grow.
const CheckpointEnv = "JOBS_CHECKPOINT"

// ProcessOptions are the appender's options of a process that writes
// output (a supervisor, a tmux job's helper): the defaults, onDropped, and
// checkpoints as CheckpointEnv says.
func ProcessOptions(onDropped func(jobID string, n int64, err error)) AppenderOptions {
	return AppenderOptions{
		OnDropped:     onDropped,
		NoCheckpoints: os.Getenv(CheckpointEnv) == "off",
	}
}
