// Package testwait is the one way the project's tests wait for a
// condition: poll it with a deadline, never a bare sleep. Each package's
// tests call it through a short helper of their own name (waitFor,
// eventually), which reads better at the call sites than a package name.
package testwait

import (
	"testing"
	"time"
)

// Tick is how often a condition is looked at: often enough that a test
// does not wait noticeably longer than the condition takes, seldom enough
// that looking does not load the machine the condition is waiting on.
const Tick = 10 * time.Millisecond

// For polls cond every Tick until it holds, and fails the test with what
// it waited for when d passes first.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// ForLast is For with a condition that also says what it last saw, which
// a failure shows.
func ForLast(t testing.TB, d time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	var last string
	if !poll(d, func() bool {
		var ok bool
		ok, last = cond()
		return ok
	}) {
		t.Fatalf("timed out after %v waiting for %s; last saw:\n%s", d, what, last)
	}
}

// poll reports whether cond held before d passed. It looks once more at
// the deadline, so a slow look does not cost the last chance.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		<-tick.C
	}
	return true
}
