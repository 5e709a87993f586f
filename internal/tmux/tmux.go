package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/textclean"
)

// Errors returned by Server methods, for errors.Is.
var (
	// ErrNotInstalled: no tmux binary was found.
	ErrNotInstalled = errors.New(notInstalledMessage())
	// ErrNoSession: the session does not exist (or no server runs on the
	// socket, which means the same thing to a caller).
	ErrNoSession = errors.New("no such tmux session")
	// ErrSessionExists: NewSession was given the name of a live session.
	ErrSessionExists = errors.New("tmux session already exists")

	// errServerExited: the server exited while the command was being
	// sent. tmux exits when its last session ends, so this happens when a
	// session is created just as the last other one is killed. The
	// session asked for is gone with the server; creating one may retry.
	errServerExited = fmt.Errorf("tmux server exited: %w", ErrNoSession)
)

func notInstalledMessage() string {
	how := "apt-get install tmux"
	if runtime.GOOS == "darwin" {
		how = "brew install tmux"
	}
	return "tmux is not installed: install it (" + how + ") or start the job without --tmux"
}

// commandTimeout bounds every tmux command. A command answers in
// milliseconds on an idle machine; one that does not for a minute is
// talking to a wedged server, and the caller (a supervisor serving many
// jobs) must not hang with it. A busy machine is not a wedged server:
// with both cores of a 2-core machine taken by parallel test runs, a new
// session and the reading of its pane's pid each took over 10 s (the
// bound this used to be), which failed jobs that would have run.
const commandTimeout = time.Minute

// literalChunk bounds the bytes of text sent by one send-keys -l. The tmux
// client refuses a command larger than its message size ("command too
// long", 16 KiB in tmux 3.x).
const literalChunk = 4096

// Server is one tmux server, on the user's default socket or a private one.
// The zero value is the default server, through the tmux found in PATH.
type Server struct {
	// Socket selects the server: a name (tmux -L, a socket in tmux's
	// directory) or, if it holds a slash, a socket path (tmux -S).
	// Empty means the default server.
	Socket string
	// Bin is the tmux program; empty means "tmux" from PATH.
	Bin string
	// Config is a configuration file the server loads when this Server
	// starts it (tmux -f); empty means tmux's usual ~/.tmux.conf. A
	// private server for jobs may use os.DevNull to keep a user's key
	// bindings and hooks out of it.
	Config string
}

// Available reports whether tmux can be used: the binary exists and is
// version 3.2 or newer. Its error is ErrNotInstalled when tmux is missing.
func (s Server) Available() error {
	bin, err := exec.LookPath(s.bin())
	if err != nil {
		return ErrNotInstalled
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-V").Output()
	if err != nil {
		return fmt.Errorf("run %s -V: %w", bin, err)
	}
	version := strings.TrimSpace(string(out))
	if major, minor, ok := parseVersion(version); ok && (major < 3 || major == 3 && minor < 2) {
		return fmt.Errorf("tmux 3.2 or newer is needed, found %s: upgrade it or start the job without --tmux", version)
	}
	return nil
}

// Compiled on first use: every jobs command loads this package, few ask
// tmux for its version.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)`) })

// parseVersion reads "tmux 3.3a" or "tmux next-3.4". Builds named after
// a branch ("tmux master") report no number and are assumed recent.
func parseVersion(v string) (major, minor int, ok bool) {
	m := versionRE().FindStringSubmatch(v)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// nameRE is what session names may hold. tmux gives '.' and ':' meaning
// in targets and would rename a session holding them; the rest is kept
// simple so a name is safe on any command line a person copies it into.
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$`) })

// ValidateName reports whether name can be used as a session name: 1 to
// 200 letters, digits, '-' and '_', starting with a letter or digit.
func ValidateName(name string) error {
	if !nameRE().MatchString(name) {
		return fmt.Errorf("invalid tmux session name %q: use letters, digits, - and _", name)
	}
	return nil
}

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	pipe string
}

// WithPipe starts "pipe-pane shellCmd" in the same tmux command that
// creates the session, so the pipe sees the command's output from its
// first byte. shellCmd runs under /bin/sh with the pane's output on its
// standard input; it is passed to tmux literally (no #{format} expansion).
func WithPipe(shellCmd string) SessionOption {
	return func(c *sessionConfig) { c.pipe = shellCmd }
}

// NewSession creates a detached session running argv in cwd, with env
// ("NAME=value") added to its environment and a window of width×height
// (0 keeps tmux's default, 80×24). With several elements argv is run
// directly; a single element is a shell command line that tmux runs with
// its default-shell; with none the session runs that shell. cwd empty
// means the server's directory.
//
// The window is set to remain-on-exit in the same tmux command, so even a
// command that exits at once leaves its dead pane for PaneStatus.
// A live session of the same name makes it fail with ErrSessionExists.
func (s Server) NewSession(ctx context.Context, name, cwd string, env, argv []string, width, height int, opts ...SessionOption) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	var cfg sessionConfig
	for _, o := range opts {
		o(&cfg)
	}
	args := []string{"new-session", "-d", "-s", name}
	if cwd != "" {
		args = append(args, "-c", escapeFormat(cwd)) // -c is expanded as a format
	}
	if width > 0 {
		args = append(args, "-x", strconv.Itoa(width))
	}
	if height > 0 {
		args = append(args, "-y", strconv.Itoa(height))
	}
	for _, kv := range env {
		if _, _, err := parse.EnvAssign(kv); err != nil {
			return fmt.Errorf("create tmux session %s: %w", name, err)
		}
		args = append(args, "-e", kv)
	}
	if len(argv) > 0 {
		args = append(args, "--")
		args = append(args, argv...)
	}
	args = escapeArgs(args)
	// Chained with ";" so that tmux runs them before it reads anything from
	// the pane or notices the command exit: no output escapes the pipe and
	// no exit status is lost.
	args = append(args, ";", "set-option", "-w", "-t", pane(name), "remain-on-exit", "on")
	if cfg.pipe != "" {
		args = append(args, ";", "pipe-pane", "-t", pane(name), escapeArg(escapeFormat(cfg.pipe)))
	}
	_, err := s.run(ctx, args...)
	for try := 1; errors.Is(err, errServerExited) && try < 5 && ctx.Err() == nil; try++ {
		// The next try starts a new server once the old one is gone.
		time.Sleep(time.Duration(try) * 20 * time.Millisecond)
		_, err = s.run(ctx, args...)
	}
	if err != nil {
		return fmt.Errorf("create tmux session %s: %w", name, err)
	}
	return nil
}

// HasSession reports whether a session of exactly this name exists. No
// server running on the socket is not an error: there is no such session.
func (s Server) HasSession(name string) (bool, error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	_, err := s.run(context.Background(), "has-session", "-t", session(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNoSession):
		return false, nil
	default:
		return false, fmt.Errorf("check tmux session %s: %w", name, err)
	}
}

// KillSession ends the session, which sends SIGHUP to the processes of its
// pane. It returns ErrNoSession if there is no such session.
func (s Server) KillSession(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if _, err := s.run(context.Background(), "kill-session", "-t", session(name)); err != nil {
		return fmt.Errorf("kill tmux session %s: %w", name, err)
	}
	return nil
}

// Capture returns the text of the session's pane as clean text: the
// visible screen, plus up to scrollback lines of history above it
// (scrollback < 0: all of the history). Wrapped lines are joined,
// trailing spaces and trailing empty lines are dropped, and each line
// ends in a newline.
func (s Server) Capture(name string, scrollback int) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	args := []string{"capture-pane", "-p", "-J", "-t", pane(name)}
	switch {
	case scrollback < 0:
		args = append(args, "-S", "-")
	case scrollback > 0:
		args = append(args, "-S", "-"+strconv.Itoa(scrollback))
	}
	out, err := s.run(context.Background(), args...)
	if err != nil {
		return "", fmt.Errorf("capture tmux session %s: %w", name, err)
	}
	lines := strings.Split(textclean.Clean([]byte(out)), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// SendKeys sends keys to the session's pane, each a tmux key name (Enter,
// C-c, Up, a single character; see parse.ValidateKey). A string that is
// not a key name is refused rather than typed, which tmux would do.
func (s Server) SendKeys(name string, keys ...string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("send keys to tmux session %s: no keys given", name)
	}
	for _, k := range keys {
		if err := parse.ValidateKey(k); err != nil {
			return fmt.Errorf("send keys to tmux session %s: %w", name, err)
		}
	}
	args := append([]string{"send-keys", "-t", pane(name), "--"}, escapeArgs(keys)...)
	if _, err := s.run(context.Background(), args...); err != nil {
		return fmt.Errorf("send keys to tmux session %s: %w", name, err)
	}
	return nil
}

// SendLiteral types text into the session's pane as is (send-keys -l): key
// names in it are not interpreted. Long text is sent in pieces, in order.
func (s Server) SendLiteral(name, text string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	for text != "" {
		n := min(len(text), literalChunk)
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n-- // never split a character between two commands
		}
		if n == 0 {
			n = min(len(text), literalChunk) // not UTF-8: split anywhere
		}
		if _, err := s.run(context.Background(), "send-keys", "-l", "-t", pane(name), "--", escapeArg(text[:n])); err != nil {
			return fmt.Errorf("type into tmux session %s: %w", name, err)
		}
		text = text[n:]
	}
	return nil
}

// PipePane pipes the pane's output, from now on, to shellCmd (run by
// /bin/sh, the output on its standard input; passed to tmux literally, no
// #{format} expansion). If a pipe is already open it is left as it is
// (pipe-pane -o). An empty shellCmd closes the pipe. To miss nothing a new
// command prints, use WithPipe when creating the session instead.
func (s Server) PipePane(name, shellCmd string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	args := []string{"pipe-pane", "-t", pane(name)}
	if shellCmd != "" {
		args = append(args, "-o", escapeArg(escapeFormat(shellCmd)))
	}
	if _, err := s.run(context.Background(), args...); err != nil {
		return fmt.Errorf("pipe tmux session %s: %w", name, err)
	}
	return nil
}

// PanePID returns the process id of the command running in the session's
// pane (the first process tmux started there).
func (s Server) PanePID(name string) (int, error) {
	v, err := s.display(name, "#{pane_pid}")
	if err != nil {
		return 0, fmt.Errorf("read pid of tmux session %s: %w", name, err)
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("read pid of tmux session %s: tmux said %q", name, v)
	}
	return pid, nil
}

// PaneStatus reports whether the command in the session's pane has ended
// and, if so, its exit status: the code it exited with, or 128+signal if
// a signal ended it. exitStatus is -1 when the pane is dead but tmux did
// not say why, and 0 while it runs. It relies on remain-on-exit, which
// NewSession sets.
func (s Server) PaneStatus(name string) (dead bool, exitStatus int, err error) {
	v, err := s.display(name, "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}")
	if err != nil {
		return false, 0, fmt.Errorf("read status of tmux session %s: %w", name, err)
	}
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return false, 0, fmt.Errorf("read status of tmux session %s: tmux said %q", name, v)
	}
	if parts[0] != "1" {
		return false, 0, nil
	}
	if code, err := strconv.Atoi(parts[1]); err == nil {
		return true, code, nil
	}
	if sig, err := strconv.Atoi(parts[2]); err == nil {
		return true, 128 + sig, nil // the shell's convention, as for pipe jobs
	}
	return true, -1, nil
}

// SetOption sets a session or window option of the session (tmux tells
// which from the option's name), e.g. "remain-on-exit" "off" or
// "history-limit" "100000".
func (s Server) SetOption(name, option, value string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if option == "" || strings.HasPrefix(option, "-") {
		return fmt.Errorf("set option of tmux session %s: invalid option name %q", name, option)
	}
	if _, err := s.run(context.Background(), "set-option", "-t", pane(name), "--", escapeArg(option), escapeArg(value)); err != nil {
		return fmt.Errorf("set option %s of tmux session %s: %w", option, name, err)
	}
	return nil
}

// AttachArgv returns the command line that attaches a terminal to the
// session: argv[0] is the tmux program. Run from inside another tmux, it
// needs TMUX removed from its environment, or tmux refuses to nest.
func (s Server) AttachArgv(name string) []string {
	argv := append([]string{s.bin()}, s.globalArgs()...)
	return append(argv, "attach-session", "-t", session(name))
}

// display returns a format expanded for the session's pane.
func (s Server) display(name, format string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	// display-message does not fail on a target it cannot find: it expands
	// the format with no pane at all. The session name in front tells
	// whether it found ours.
	out, err := s.run(context.Background(), "display-message", "-p", "-t", pane(name), "#{session_name}|"+format)
	if err != nil {
		return "", err
	}
	got, value, _ := strings.Cut(strings.TrimRight(out, "\n"), "|")
	if got != name {
		return "", ErrNoSession
	}
	return value, nil
}

// session is the exact target of a session: "=" stops tmux from taking
// the name as a prefix or pattern.
func session(name string) string { return "=" + name }

// pane is the exact target of the session's active pane, for commands
// that take a pane or window.
func pane(name string) string { return "=" + name + ":" }

func (s Server) bin() string {
	if s.Bin == "" {
		return "tmux"
	}
	return s.Bin
}

// globalArgs are the options that select the server.
func (s Server) globalArgs() []string {
	var args []string
	if s.Config != "" {
		args = append(args, "-f", s.Config)
	}
	switch {
	case strings.Contains(s.Socket, "/"):
		args = append(args, "-S", s.Socket)
	case s.Socket != "":
		args = append(args, "-L", s.Socket)
	}
	return args
}

// run runs one tmux command line and returns its standard output.
func (s Server) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin(), append(s.globalArgs(), args...)...)
	cmd.Env = clientEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A server that new-session starts is a daemon and closes what it
	// inherits; should one keep our pipes open anyway, Wait must not wait
	// for it.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotInstalled
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("tmux %s: %w", args[0], ctx.Err())
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case strings.Contains(msg, "server exited unexpectedly"):
		return "", errServerExited
	case isNoSession(msg):
		return "", ErrNoSession
	case strings.HasPrefix(msg, "duplicate session"):
		return "", ErrSessionExists
	case msg == "":
		return "", fmt.Errorf("tmux %s: %w", args[0], err)
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // one line, as errors are shown
	}
	return "", fmt.Errorf("tmux %s: %s", args[0], msg)
}

// isNoSession reports whether tmux's complaint means the target is not
// there: no such session, window or pane, or no server at all.
func isNoSession(msg string) bool {
	for _, s := range []string{
		"can't find session", "can't find window", "can't find pane",
		"no server running", "no current target",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	// A socket file left by a server that died.
	return strings.HasPrefix(msg, "error connecting to") &&
		(strings.Contains(msg, "No such file or directory") || strings.Contains(msg, "Connection refused"))
}

// clientEnv is the environment for tmux commands: ours without TMUX and
// TMUX_PANE, which would otherwise point the default socket at whatever
// server the caller happens to run inside, and without JOBS_ID: a tmux
// server first started from inside a job would carry that job's id, and
// killing the job would kill the server with every session on it.
func clientEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "TMUX=") || strings.HasPrefix(kv, "TMUX_PANE=") || strings.HasPrefix(kv, "JOBS_ID=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// escapeArg protects an argument from tmux's command splitting: an
// argument ending in ";" ends the command unless a backslash precedes the
// semicolon, and tmux then drops that backslash. Inserting one backslash
// before the final ";" therefore round-trips every string, including one
// that already ends in `\;`.
func escapeArg(a string) string {
	if strings.HasSuffix(a, ";") {
		return a[:len(a)-1] + `\;`
	}
	return a
}

func escapeArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = escapeArg(a)
	}
	return out
}

// escapeFormat protects a string tmux expands as a format (#{…}, #S …):
// "##" is a literal "#".
func escapeFormat(s string) string {
	return strings.ReplaceAll(s, "#", "##")
}
