// Package testlong says whether the tests run their long adversarial
// sizes: the floods, kills and histories of the reliability matrix at the
// sizes it states, the largest logs, the most rounds. They are on with
// JOBS_TEST_LONG=1, and in CI (CI=true, which CI sets); off, the same
// cases run at sizes that keep `go test -race ./...` to a few minutes on
// two cores. A test never skips a case for being off: it runs it smaller.
package testlong

import "os"

// On reports whether the long sizes are asked for.
func On() bool {
	return os.Getenv("JOBS_TEST_LONG") == "1" || os.Getenv("CI") == "true"
}

// Pick returns long when the long sizes are on, else short.
func Pick[T any](short, long T) T {
	if On() {
		return long
	}
	return short
}
