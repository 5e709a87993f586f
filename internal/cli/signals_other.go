//go:build !linux

package cli

// BSD and macOS numbering.
const (
	usr1 = 30
	usr2 = 31
	chld = 20
	cont = 19
	stop = 17
	tstp = 18
	urg  = 16
)
