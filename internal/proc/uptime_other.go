//go:build !linux

package proc

import "time"

// Since cannot read process start times here; it reports false.
func Since(start int64) (time.Duration, bool) { return 0, false }
