//go:build !linux

package supervisor

// awaitExit returns at once: the caller's Wait does the waiting.
func awaitExit(int) {}
