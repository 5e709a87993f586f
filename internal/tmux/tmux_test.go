package tmux

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/internal/textclean"
)

// testServer returns a private tmux server for one test, loading no
// configuration, and ends it when the test ends.
func testServer(t *testing.T) Server {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed; the tmux tests need it")
	}
	b := make([]byte, 6)
	rand.Read(b)
	s := Server{Socket: "jobs-test-" + hex.EncodeToString(b), Config: os.DevNull}
	t.Cleanup(func() {
		// kill-server leaves the socket file behind; ask where it is first.
		path, err := s.run(context.Background(), "display-message", "-p", "#{socket_path}")
		s.run(context.Background(), "kill-server")
		if path = strings.TrimSpace(path); err == nil && path != "" {
			os.Remove(path)
		}
	})
	return s
}

// newSession creates a session for a test with a fixed size.
func newSession(t *testing.T, s Server, name string, env []string, argv ...string) {
	t.Helper()
	if err := s.NewSession(context.Background(), name, t.TempDir(), env, argv, 80, 24); err != nil {
		t.Fatalf("NewSession(%s): %v", name, err)
	}
}

// waitFor polls cond until it holds or the deadline passes, then fails
// with what it last saw.
func waitFor(t *testing.T, what string, cond func() (ok bool, last string)) {
	t.Helper()
	testwait.ForLast(t, time.Minute, what, cond)
}

// waitScreen waits until the session's screen has a line equal to want.
func waitScreen(t *testing.T, s Server, name, want string) string {
	t.Helper()
	var screen string
	waitFor(t, "line "+want+" on the screen of "+name, func() (bool, string) {
		var err error
		screen, err = s.Capture(name, 0)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(strings.Split(screen, "\n"), want), screen
	})
	return screen
}

// waitLastLine waits until the last line on the session's screen is want.
func waitLastLine(t *testing.T, s Server, name, want string) {
	t.Helper()
	waitFor(t, "last line "+want+" on the screen of "+name, func() (bool, string) {
		screen, err := s.Capture(name, 0)
		if err != nil {
			return false, err.Error()
		}
		lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
		return lines[len(lines)-1] == want, screen
	})
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{"jobs-abc", "a", "A_1-b", "0abc", strings.Repeat("x", 200)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "a.b", "a:b", "-a", "_a", "=a", "a b", "a;", "a#b", "é", strings.Repeat("x", 201)} {
		if err := ValidateName(name); err == nil {
			t.Errorf("ValidateName(%q) = nil, want an error", name)
		}
	}
	s := Server{Socket: "unused"}
	if err := s.KillSession("a.b"); err == nil || !strings.Contains(err.Error(), `invalid tmux session name "a.b"`) {
		t.Errorf("KillSession(a.b) = %v, want an invalid name error", err)
	}
}

func TestAvailable(t *testing.T) {
	s := Server{Bin: filepath.Join(t.TempDir(), "no-tmux-here")}
	err := s.Available()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Available() = %v, want ErrNotInstalled", err)
	}
	if !strings.HasPrefix(err.Error(), "tmux is not installed: install it (") ||
		!strings.HasSuffix(err.Error(), ") or start the job without --tmux") {
		t.Errorf("Available() error = %q", err)
	}
	if _, err := s.HasSession("x"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("HasSession with no tmux = %v, want ErrNotInstalled", err)
	}

	if _, err := exec.LookPath("tmux"); err == nil {
		if err := (Server{}).Available(); err != nil {
			t.Errorf("Available() with tmux installed = %v", err)
		}
	}

	for v, want := range map[string][3]int{
		"tmux 3.3a":      {3, 3, 1},
		"tmux next-3.4":  {3, 4, 1},
		"tmux 2.9":       {2, 9, 1},
		"tmux master":    {0, 0, 0},
		"tmux 10.12-rc2": {10, 12, 1},
	} {
		major, minor, ok := parseVersion(v)
		if got := [3]int{major, minor, map[bool]int{true: 1}[ok]}; got != want {
			t.Errorf("parseVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestShellREPL(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	newSession(t, s, "repl", []string{"PS1=sh> ", "ENV="}, "sh", "-i")
	waitFor(t, "the prompt", func() (bool, string) {
		screen, _ := s.Capture("repl", 0)
		return strings.HasPrefix(screen, "sh>"), screen
	})

	// Typed text ending in ";" must reach the shell whole, not end the
	// tmux command.
	if err := s.SendLiteral("repl", "echo $((6*7));"); err != nil {
		t.Fatal(err)
	}
	if err := s.SendKeys("repl", "Enter"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, s, "repl", "42")

	// Key names, including ";" and Space as keys.
	if err := s.SendKeys("repl", "e", "c", "h", "o", "Space", "k", "e", "y", "s", ";", "Enter"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, s, "repl", "keys")

	// C-c interrupts a running command and the shell answers again.
	// The child says when it runs, so C-c cannot arrive before it does.
	if err := s.SendLiteral("repl", "sh -c 'echo sleep-$((1+1)); exec sleep 30'"); err != nil {
		t.Fatal(err)
	}
	if err := s.SendKeys("repl", "Enter"); err != nil {
		t.Fatal(err)
	}
	waitLastLine(t, s, "repl", "sleep-2")
	if err := s.SendKeys("repl", "C-c"); err != nil {
		t.Fatal(err)
	}
	// Typed before the prompt is back, the text would be echoed ahead of it.
	waitLastLine(t, s, "repl", "sh>")
	if err := s.SendLiteral("repl", "echo after-interrupt\n"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, s, "repl", "after-interrupt")

	// A string that is no key name is refused, not typed.
	err := s.SendKeys("repl", "echo hi")
	if !errors.Is(err, parse.ErrInvalid) {
		t.Errorf("SendKeys(echo hi) = %v, want parse.ErrInvalid", err)
	}
}

func TestPythonREPL(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	s := testServer(t)
	// The basic REPL keeps the screen plain on Python 3.13 and later.
	newSession(t, s, "py", []string{"PYTHON_BASIC_REPL=1", "PYTHONSTARTUP="}, "python3", "-q")
	waitFor(t, "the prompt", func() (bool, string) {
		screen, _ := s.Capture("py", 0)
		return strings.HasPrefix(screen, ">>>"), screen
	})
	if err := s.SendLiteral("py", "print(6 * 7)"); err != nil {
		t.Fatal(err)
	}
	if err := s.SendKeys("py", "Enter"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, s, "py", "42")
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"exit7", []string{"sh", "-c", "exit 7"}, 7},
		{"exit0", []string{"sh", "-c", "echo done"}, 0},
		{"shellline", []string{"exit 3"}, 3}, // one element: a shell command line
		{"signal", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
	}
	for _, tt := range tests {
		newSession(t, s, tt.name, nil, tt.argv...)
	}
	for _, tt := range tests {
		var dead bool
		var code int
		waitFor(t, tt.name+" to end", func() (bool, string) {
			var err error
			dead, code, err = s.PaneStatus(tt.name)
			if err != nil {
				return false, err.Error()
			}
			return dead, "still running"
		})
		// tmux marks a pane dead when its terminal closes, which may come
		// a moment before it has reaped the process and knows the status
		// (-1 until then): callers wait for it, as readTmuxEnd does.
		for deadline := time.Now().Add(2 * time.Second); code == -1 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // polling tmux, which offers no event
			_, code, _ = s.PaneStatus(tt.name)
		}
		if tt.name == "signal" && code == -1 {
			t.Log("this tmux does not report the signal that ended a pane")
			continue
		}
		if code != tt.want {
			t.Errorf("%s: exit status %d, want %d", tt.name, code, tt.want)
		}
		// The session stays for the caller to read and close.
		if ok, err := s.HasSession(tt.name); !ok || err != nil {
			t.Errorf("%s: HasSession after exit = %v, %v; want true", tt.name, ok, err)
		}
		if err := s.KillSession(tt.name); err != nil {
			t.Errorf("%s: KillSession: %v", tt.name, err)
		}
	}

	newSession(t, s, "running", nil, "sleep", "60")
	if dead, code, err := s.PaneStatus("running"); dead || code != 0 || err != nil {
		t.Errorf("PaneStatus(running) = %v, %d, %v; want false, 0, nil", dead, code, err)
	}
	if _, _, err := s.PaneStatus("gone"); !errors.Is(err, ErrNoSession) {
		t.Errorf("PaneStatus(gone) = %v, want ErrNoSession", err)
	}
}

// readFile returns the file's content, or the error as text.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestPipe(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	dir := t.TempDir()

	// Set up with the session, the pipe sees the output of a command that
	// prints at once. (The command then waits: what a pane's process
	// writes just before it exits can be lost when the machine is busy, as
	// tmux closes a pane once its process is gone and the terminal reports
	// nothing unread, which the kernel can report before the last bytes
	// are through.) The '#' checks the command is not taken as a tmux
	// format.
	fast := filepath.Join(dir, "fast#1.log")
	err := s.NewSession(context.Background(), "fast", dir, nil,
		[]string{"sh", "-c", "printf 'fast-output\\n'; read x"}, 80, 24,
		WithPipe("cat >> "+textclean.ShellQuote(fast)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fast command's output in the pipe", func() (bool, string) {
		got := readFile(fast)
		return strings.Contains(got, "fast-output"), got
	})

	// Started later, the pipe sees what comes after.
	newSession(t, s, "later", []string{"PS1=$ ", "ENV="}, "sh", "-i")
	later := filepath.Join(dir, "later.log")
	if err := s.PipePane("later", "cat >> "+textclean.ShellQuote(later)); err != nil {
		t.Fatal(err)
	}
	if err := s.SendLiteral("later", "echo pipe-$((40+2))\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the echo in the pipe", func() (bool, string) {
		got := readFile(later)
		return strings.Contains(got, "pipe-42"), got
	})
	if err := s.PipePane("later", ""); err != nil {
		t.Errorf("close the pipe: %v", err)
	}
}

// TestExactTarget proves sessions are addressed by their exact name: tmux
// would otherwise take "jobs-ab" as a prefix of "jobs-abc".
func TestExactTarget(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	newSession(t, s, "jobs-abc", nil, "sh", "-c", "echo I-am-abc; exec sleep 60")
	waitScreen(t, s, "jobs-abc", "I-am-abc")

	// The hazard is real: without "=", tmux finds jobs-abc for jobs-ab.
	if _, err := s.run(context.Background(), "has-session", "-t", "jobs-ab"); err != nil {
		t.Logf("this tmux does not match prefixes (%v); the test still checks exact targets", err)
	}

	if ok, err := s.HasSession("jobs-ab"); ok || err != nil {
		t.Errorf("HasSession(jobs-ab) with only jobs-abc = %v, %v; want false, nil", ok, err)
	}
	if _, err := s.Capture("jobs-ab", 0); !errors.Is(err, ErrNoSession) {
		t.Errorf("Capture(jobs-ab) with only jobs-abc = %v, want ErrNoSession", err)
	}
	if err := s.SendKeys("jobs-ab", "C-c"); !errors.Is(err, ErrNoSession) {
		t.Errorf("SendKeys(jobs-ab) with only jobs-abc = %v, want ErrNoSession", err)
	}
	if err := s.KillSession("jobs-ab"); !errors.Is(err, ErrNoSession) {
		t.Errorf("KillSession(jobs-ab) with only jobs-abc = %v, want ErrNoSession", err)
	}
	if ok, err := s.HasSession("jobs-abc"); !ok || err != nil {
		t.Fatalf("jobs-abc is gone after acting on jobs-ab: %v, %v", ok, err)
	}

	newSession(t, s, "jobs-ab", nil, "sh", "-c", "echo I-am-ab; exec sleep 60")
	screen := waitScreen(t, s, "jobs-ab", "I-am-ab")
	if strings.Contains(screen, "I-am-abc") {
		t.Errorf("Capture(jobs-ab) shows jobs-abc:\n%s", screen)
	}
	abPID, err := s.PanePID("jobs-ab")
	if err != nil {
		t.Fatal(err)
	}
	abcPID, err := s.PanePID("jobs-abc")
	if err != nil {
		t.Fatal(err)
	}
	if abPID == abcPID {
		t.Fatalf("jobs-ab and jobs-abc report the same pane pid %d", abPID)
	}

	if err := s.KillSession("jobs-ab"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.HasSession("jobs-ab"); ok {
		t.Error("jobs-ab still exists after KillSession")
	}
	if ok, err := s.HasSession("jobs-abc"); !ok || err != nil {
		t.Errorf("KillSession(jobs-ab) took jobs-abc too: %v, %v", ok, err)
	}
	if err := syscall.Kill(abcPID, 0); err != nil {
		t.Errorf("the process of jobs-abc is gone: %v", err)
	}
}

func TestSessionSetup(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	cwd := filepath.Join(t.TempDir(), "dir #1")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"FOO=bar #{pane_id} baz", "SEMI=x;", "EMPTY="}
	// The last argument ends in ";", which tmux would take as the end of
	// its command if it were not escaped.
	argv := []string{"sh", "-c", `printf '%s|%s|%s|%s|%s\n' "$FOO" "$SEMI" "${EMPTY-unset}" "$(pwd)" "$1"; exec sleep 60`, "sh", `arg\;`}
	if err := s.NewSession(context.Background(), "setup", cwd, env, argv, 100, 30); err != nil {
		t.Fatal(err)
	}
	want := "bar #{pane_id} baz|x;||" + cwd + `|arg\;`
	waitScreen(t, s, "setup", want)

	size, err := s.display("setup", "#{pane_width}x#{pane_height}")
	if err != nil || size != "100x30" {
		t.Errorf("pane size = %q, %v; want 100x30", size, err)
	}
	pid, err := s.PanePID("setup")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("pane pid %d: %v", pid, err)
	}

	err = s.NewSession(context.Background(), "setup", cwd, nil, []string{"true"}, 0, 0)
	if !errors.Is(err, ErrSessionExists) {
		t.Errorf("second NewSession(setup) = %v, want ErrSessionExists", err)
	}
	err = s.NewSession(context.Background(), "badenv", cwd, []string{"1X=y"}, []string{"true"}, 0, 0)
	if !errors.Is(err, parse.ErrInvalid) {
		t.Errorf("NewSession with a bad env name = %v, want parse.ErrInvalid", err)
	}
}

func TestSetOption(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	newSession(t, s, "opts", nil, "sleep", "60")
	show := func(flag, option string) string {
		t.Helper()
		v, err := s.run(context.Background(), "show-options", flag+"v", "-t", pane("opts"), option)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
	if got := show("-w", "remain-on-exit"); got != "on" {
		t.Errorf("remain-on-exit after NewSession = %q, want on", got)
	}
	if err := s.SetOption("opts", "remain-on-exit", "off"); err != nil {
		t.Fatal(err)
	}
	if got := show("-w", "remain-on-exit"); got != "off" {
		t.Errorf("remain-on-exit = %q, want off", got)
	}
	if err := s.SetOption("opts", "status", "off"); err != nil {
		t.Fatal(err)
	}
	if got := show("-", "status"); got != "off" {
		t.Errorf("status = %q, want off", got)
	}
	if err := s.SetOption("opts", "no-such-option", "1"); err == nil {
		t.Error("SetOption(no-such-option) = nil, want an error")
	}
}

func TestCaptureScrollback(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	err := s.NewSession(context.Background(), "scroll", t.TempDir(), nil,
		[]string{"sh", "-c", `i=1; while [ $i -le 100 ]; do echo line$i; i=$((i+1)); done; exec sleep 60`}, 80, 10)
	if err != nil {
		t.Fatal(err)
	}
	screen := waitScreen(t, s, "scroll", "line100")
	if strings.Contains(screen, "line1\n") || strings.Count(screen, "\n") > 10 {
		t.Errorf("visible screen holds more than 10 lines:\n%s", screen)
	}
	some, err := s.Capture("scroll", 20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(some, "line80\n") || strings.Contains(some, "line70\n") {
		t.Errorf("Capture with 20 lines of scrollback:\n%s", some)
	}
	all, err := s.Capture("scroll", -1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(all, "line1\nline2\n") || !strings.HasSuffix(all, "line100\n") {
		t.Errorf("Capture of all history:\n%s", all)
	}
}

func TestSendLiteralLong(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	out := filepath.Join(t.TempDir(), "out")
	newSession(t, s, "long", nil, "sh", "-c", "stty -echo; cat > "+textclean.ShellQuote(out))
	// Lines stay under the terminal's line limit; the whole is several
	// times what one tmux command may carry.
	var b strings.Builder
	for i := 0; b.Len() < 5*literalChunk; i++ {
		b.WriteString(strings.Repeat("✓ab", 20))
		b.WriteString("\n")
	}
	text := b.String()
	if err := s.SendLiteral("long", text); err != nil {
		t.Fatal(err)
	}
	if err := s.SendKeys("long", "C-d"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cat to write everything", func() (bool, string) {
		got := readFile(out)
		return got == text, got
	})
}

// TestAttach runs AttachArgv inside a session of a second tmux server and
// reads the attached session's screen through it, as a person would see it.
func TestAttach(t *testing.T) {
	t.Parallel()
	inner := testServer(t)
	outer := testServer(t)
	newSession(t, inner, "watched", nil, "sh", "-c", "echo watched-screen; exec sleep 60")
	waitScreen(t, inner, "watched", "watched-screen")

	argv := inner.AttachArgv("watched")
	if got, want := argv[len(argv)-3:], []string{"attach-session", "-t", "=watched"}; !slices.Equal(got, want) {
		t.Errorf("AttachArgv ends with %q, want %q", got, want)
	}
	// Inside the outer tmux, TMUX is set and tmux would refuse to nest.
	wrapped := append([]string{"sh", "-c", `unset TMUX; exec "$@"`, "sh"}, argv...)
	newSession(t, outer, "person", []string{"TERM=xterm"}, wrapped...)
	waitScreen(t, outer, "person", "watched-screen")
	attached, err := inner.display("watched", "#{session_attached}")
	if err != nil || attached != "1" {
		t.Errorf("session_attached = %q, %v; want 1", attached, err)
	}
}
