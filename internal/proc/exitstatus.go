package proc

import (
	"os"
	"syscall"

	"github.com/agentjobs/jobs/internal/vocab"
)

// ExitStatus returns the exit code of a finished process, 128+n for death
// by signal n as shells report it, and the signal's name.
func ExitStatus(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), vocab.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
