package runner

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
)

// A tmux job's environment does not go on the tmux command line: every
// user can read a process's argv in /proc, and a tmux server started by
// new-session keeps the argv of the client that started it for its whole
// life, `-e API_KEY=value` included. The supervisor writes the environment
// to a file only its user can read, in its runtime directory, and the pane
// starts with `jobs tmux-exec --env-file FILE -- ARGV…`, which reads and
// removes the file and execs the command with it (same pid, so the pane's
// pid is the job's main process as before).

// writeEnvFile writes env, each entry ended by a NUL, to a new file in
// dir, readable by its owner only, and returns its path.
func writeEnvFile(dir string, env []string) (string, error) {
	f, err := os.CreateTemp(dir, "tmux-env-*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write job environment: %w", err)
	}
	var b bytes.Buffer
	for _, kv := range env {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write job environment: %w", err)
	}
	return f.Name(), nil
}

// TmuxExec is the start of a tmux job's pane: it reads the job's
// environment from envFile, removes the file, and execs argv with that
// environment over the pane's own (which keeps TERM, TMUX and TMUX_PANE
// from tmux). It returns only on failure.
func TmuxExec(envFile string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("start job: no command")
	}
	b, err := os.ReadFile(envFile)
	os.Remove(envFile)
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
		if path, err = lookPath(argv[0], envValue(env, "PATH"), cwd); err != nil {
			return fmt.Errorf("start job: %w", err)
		}
	}
	return fmt.Errorf("start job: %w", syscall.Exec(path, argv, env))
}
