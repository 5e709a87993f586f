package vocab

import (
	"testing"
	"time"
)

func TestRetryIn(t *testing.T) {
	for _, tc := range []struct {
		terminal bool
		quiet    time.Duration
		misses   int
		want     time.Duration
	}{
		{true, time.Hour, 0, 0},
		{false, 0, 0, MinRetry},
		{false, 100 * time.Millisecond, 0, MinRetry},
		{false, 10 * time.Second, 0, 5 * time.Second},
		{false, time.Hour, 0, MaxRetry},
		{false, time.Second, 1, 2 * time.Second},
		{false, time.Second, 3, 8 * time.Second},
		{false, time.Second, 100, MaxRetry},
		{false, time.Second, -1, MinRetry},
	} {
		if got := RetryIn(tc.terminal, tc.quiet, tc.misses); got != tc.want {
			t.Errorf("RetryIn(%v, %v, %d) = %v, want %v", tc.terminal, tc.quiet, tc.misses, got, tc.want)
		}
	}
}
