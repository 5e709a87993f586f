//go:build race

package e2e

// raceEnabled scales floods down under the race detector.
const raceEnabled = true
