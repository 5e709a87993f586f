package tmuxpipe

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/proc"
)

// A tmux job's environment does not go on the tmux command line: every
// user can read a process's argv in /proc, and a tmux server started by
// new-session keeps the argv of the client that started it for its whole
// life, `-e API_KEY=value` included. The supervisor writes the environment
// to a file only its user can read, in its runtime directory, and the pane
// starts with `jobs tmux-exec --env-file FILE -- ARGV…`, which reads and
// removes the file and execs the command with it (same pid, so the pane's
// pid is the job's main process as before).

// Exec is the start of a tmux job's pane: it reads the job's
// environment from envFile (written by the supervisor: entries each ended
// by a NUL), removes the file, and execs argv with that
// environment over the pane's own (which keeps TERM, TMUX and TMUX_PANE
// from tmux). It returns only on failure.
func Exec(envFile string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("start job: no command")
	}
	b, err := readEnvFile(envFile)
	if err != nil {
		return fmt.Errorf("start job: read its environment: %w", err)
	}
	var env []string
	for kv := range strings.SplitSeq(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		if kv != "" {
			env = append(env, kv)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			env = append(env, kv)
		}
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		cwd, _ := os.Getwd()
		if path, err = proc.LookPath(argv[0], parse.EnvValue(env, "PATH"), cwd); err != nil {
			return fmt.Errorf("start job: %w", err)
		}
	}
	return fmt.Errorf("start job: %w", syscall.Exec(path, argv, env))
}

// readEnvFile reads and removes the environment file the supervisor wrote
// (privfile: a regular file of ours, never through a symlink).
func readEnvFile(path string) ([]byte, error) {
	f, err := privfile.Open("job environment", path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	os.Remove(path)
	return io.ReadAll(f)
}
