// Package parse reads the values people and agents type: durations, byte
// sizes, environment assignments and tmux key names.
//
// Every function rejects what it cannot read with a one-line error that
// quotes the input and says what would be accepted, so the CLI and the MCP
// server can show it as is:
//
//	invalid duration "5x": use Go syntax like 90s, 5m, 1h
//
// All such errors match ErrInvalid with errors.Is, which front ends use to
// tell a usage error from a failure.
package parse
