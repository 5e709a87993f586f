package vocab

import "time"

// Poll back-off: how long a caller that polls a running job should wait
// before it polls again.
const (
	MinRetry = time.Second
	MaxRetry = 30 * time.Second
)

// RetryIn suggests when to poll a job again: half the time since its last
// sign of life (its last output, else its start), between MinRetry and
// MaxRetry, grown by one step for each earlier poll in a row that saw
// nothing change (misses), and 0 for a finished job. A job silent for
// minutes is not about to change within a second; one that just wrote may.
func RetryIn(terminal bool, quiet time.Duration, misses int) time.Duration {
	if terminal {
		return 0
	}
	d := max(quiet/2, MinRetry)
	for range min(max(misses, 0), 6) {
		d *= 2
	}
	return min(d, MaxRetry)
}
