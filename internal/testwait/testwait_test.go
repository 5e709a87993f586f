package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// A condition that keeps moving is waited for past the stall time; one
// that stops moving fails after it, long before the limit.
func TestForProgress(t *testing.T) {
	const stall = 200 * time.Millisecond
	start := time.Now()
	moving := &recorder{TB: t}
	n := int64(0)
	ForProgress(moving, stall, time.Minute, "a slow count to 12", func() (bool, int64, string) {
		n++
		time.Sleep(stall / 10) // every look moves it on
		return n >= 12, n, fmt.Sprint(n)
	})
	if moving.failed != "" {
		t.Fatalf("a moving condition failed: %s", moving.failed)
	}
	if took := time.Since(start); took < stall {
		t.Fatalf("the moving condition took %v, less than the stall time: it proved nothing", took)
	}

	stuck := &recorder{TB: t}
	start = time.Now()
	ForProgress(stuck, stall, time.Minute, "a stuck count", func() (bool, int64, string) {
		return false, 3, "at three"
	})
	if !strings.Contains(stuck.failed, "no progress") || !strings.Contains(stuck.failed, "at three") {
		t.Fatalf("a stuck condition: %q", stuck.failed)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("a stuck condition failed only after %v", took)
	}
}
