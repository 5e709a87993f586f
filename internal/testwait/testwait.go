// Package testwait is the one way the project's tests wait for a
// condition: poll it with a deadline, never a bare sleep. Each package's
// tests call it through a short helper of their own name (waitFor,
// eventually), which reads better at the call sites than a package name.
package testwait

import (
	"testing"
	"time"
)

// Tick is how often a cheap condition is looked at: often enough that a
// test does not wait noticeably longer than the condition takes. A
// condition that costs more to look at (one that runs a jobs command,
// say) is looked at less often: after each look the poll rests twice as
// long as the look took, up to MaxTick, so that looking takes at most a
// third of the machine a waiting test holds, and less still when the
// machine is loaded and every look is slow.
const (
	Tick    = 10 * time.Millisecond
	MaxTick = 250 * time.Millisecond
)

// Least is the least time For and ForLast give a condition, whatever d
// their caller names. A bound only bounds a failure: what takes
// milliseconds on an idle machine took over 10 s (a tmux command, a
// killed process's lock) and over 20 s (a browser following a link) on a
// 2-core machine running the race run, the end-to-end tests and
// stress-ng at once, and a test that fails there proves nothing.
const Least = time.Minute

// For polls cond until it holds, and fails the test with what it waited
// for when d (Least at least) passes first.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, Least)
	if !poll(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// ForLast is For with a condition that also says what it last saw, which
// a failure shows.
func ForLast(t testing.TB, d time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	d = max(d, Least)
	var last string
	if !poll(d, func() bool {
		var ok bool
		ok, last = cond()
		return ok
	}) {
		t.Fatalf("timed out after %v waiting for %s; last saw:\n%s", d, what, last)
	}
}

// ForProgress waits for a condition that is reached step by step, such
// as a line that comes after many others: cond says whether it holds and
// how far things have come (a count that only grows). It fails when the
// count has not grown for stall, or when limit has passed in all. A
// loaded machine may take long to get there; a stuck one stops moving,
// and only that fails.
func ForProgress(t testing.TB, stall, limit time.Duration, what string, cond func() (ok bool, progress int64, last string)) {
	t.Helper()
	var (
		last    string
		best    int64 = -1
		moved         = time.Now()
		stalled bool
	)
	held := poll(limit, func() bool {
		ok, n, seen := cond()
		last = seen
		if n > best {
			best, moved = n, time.Now()
		}
		stalled = !ok && time.Since(moved) > stall
		return ok || stalled // a stall ends the polling too
	})
	switch {
	case stalled:
		t.Fatalf("waiting for %s: no progress for %v (at %d); last saw:\n%s", what, stall, best, last)
	case !held:
		t.Fatalf("timed out after %v waiting for %s (at %d); last saw:\n%s", limit, what, best, last)
	}
}

// poll reports whether cond held before d passed. It looks once more at
// the deadline, so a slow look does not cost the last chance.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		t0 := time.Now()
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(rest(time.Since(t0)))
	}
}

// rest is how long to wait after a look that took took.
func rest(took time.Duration) time.Duration {
	return min(max(Tick, 2*took), MaxTick)
}
