//go:build race

package e2e

// raceEnabled scales the floods and load rows down: the race detector
// slows the helper processes (this test binary) several times.
const raceEnabled = true
