// Package sigreset starts programs with an empty signal mask and default
// signal dispositions, whatever the calling process inherited.
//
// Go starts a child with the signal mask its own process started with,
// and leaves an inherited SIG_IGN in place for the signals it does not
// handle itself (SIGHUP and SIGINT when they arrive ignored, SIGTSTP,
// SIGTTIN, SIGTTOU, and any signal the program ignores). A launcher that
// blocks SIGPIPE or ignores SIGTTOU before it runs a supervisor would hand
// that to every job, and no field of syscall.SysProcAttr changes it. So
// when the calling process has a signal blocked or ignored, Wrap runs the
// command through this package's shim: the calling program's own
// executable (/proc/self/exe) re-run with a marker, which this package's
// init function recognises before the program's main runs; the shim sets
// every ignored signal to its default, unblocks all signals on its thread
// and execs the command in place (same pid, process group and descriptors
// 0-2). A program that embeds the supervisor links this package, so the
// shim works there too. When nothing is blocked or ignored, which is the
// usual case, the command is started directly and costs nothing more.
package sigreset

import (
	"os"
	"strings"
)

const (
	// shimArg0 and shimEnv mark a run of the shim: both must be present.
	shimArg0 = "jobs-sigreset"
	shimEnv  = "JOBS_SIGRESET_SHIM"
)

func init() {
	if len(os.Args) >= 4 && os.Args[0] == shimArg0 && os.Getenv(shimEnv) == "1" {
		os.Exit(shim(os.Args[1], os.Args[2], os.Args[3:]))
	}
}

// withoutMarker returns env without the shim's marker.
func withoutMarker(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, shimEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
