package textclean

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// These tests clean output captured from real programs, which is what the
// cleaner meets in production. Each skips if its program is missing.

// run runs name with args in dir and returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// requireEscapes fails when raw holds no escape sequence: the program did
// not colour its output, so the test would prove nothing.
func requireEscapes(t *testing.T, raw []byte) {
	t.Helper()
	if !bytes.Contains(raw, []byte("\x1b[")) {
		t.Skipf("no escape sequences in the output: %q", raw)
	}
}

func TestCleanGit(t *testing.T) {
	dir := t.TempDir()
	// Keep the machine's git configuration out of the test.
	env := []string{
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com",
	}
	git := func(args ...string) []byte {
		t.Helper()
		return run(t, dir, env, "git", args...)
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "a.txt")
	git("commit", "-q", "-m", "first commit")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\nTWO\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	raw := git("-c", "color.ui=always", "diff")
	requireEscapes(t, raw)
	got := Clean(raw)
	checkClean(t, raw, got)
	for _, line := range []string{"-two\n", "+TWO\n", "+three\n", " one\n", "--- a/a.txt\n", "+++ b/a.txt\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("cleaned diff lacks %q:\n%s", line, got)
		}
	}

	raw = git("-c", "color.ui=always", "log", "--decorate")
	requireEscapes(t, raw)
	got = Clean(raw)
	checkClean(t, raw, got)
	hash := strings.TrimSpace(string(git("rev-parse", "HEAD")))
	if !strings.HasPrefix(got, "commit "+hash+" (HEAD -> main)\n") {
		t.Errorf("cleaned log does not start with the commit line:\n%s", got)
	}
	if !strings.Contains(got, "    first commit\n") {
		t.Errorf("cleaned log lacks the message:\n%s", got)
	}
}

func TestCleanProgressLoop(t *testing.T) {
	// A progress counter as shell scripts write it, then a bar redrawn
	// with erase-in-line as npm and cargo do.
	script := `for i in 10 20 30 40 50 60 70 80 90 100; do printf '\rprogress %s%%' $i; done; printf '\n'
for i in 1 2 3; do printf '\r\033[K[%s/3] building' $i; done; printf '\r\033[Kbuilt\n'`
	raw := run(t, "", nil, "sh", "-c", script)
	got := Clean(raw)
	checkClean(t, raw, got)
	if want := "progress 100%\nbuilt\n"; got != want {
		t.Errorf("Clean(%q) = %q, want %q", raw, got, want)
	}
}

func TestCleanLs(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sub", "exe.sh", "plain.txt"} {
		path := filepath.Join(dir, name)
		var err error
		switch name {
		case "sub":
			err = os.Mkdir(path, 0o755)
		case "exe.sh":
			err = os.WriteFile(path, nil, 0o755)
		default:
			err = os.WriteFile(path, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := exec.Command("ls", "--color=always", dir).Run(); err != nil {
		t.Skip("ls has no --color (not GNU ls)")
	}
	raw := run(t, dir, []string{"LS_COLORS=di=01;34:ex=01;32"}, "ls", "--color=always", "-1")
	requireEscapes(t, raw)
	got := Clean(raw)
	checkClean(t, raw, got)
	if want := "exe.sh\nplain.txt\nsub\n"; got != want {
		t.Errorf("Clean(%q) = %q, want %q", raw, got, want)
	}
}

func TestCleanGrep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(path, []byte("alpha beta\ngamma\nbeta gamma beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := run(t, dir, []string{"GREP_COLORS=", "GREP_COLOR="}, "grep", "--color=always", "-n", "beta", "f.txt")
	requireEscapes(t, raw)
	got := Clean(raw)
	checkClean(t, raw, got)
	if want := "1:alpha beta\n3:beta gamma beta\n"; got != want {
		t.Errorf("Clean(%q) = %q, want %q", raw, got, want)
	}
}

func TestCleanCursorMovement(t *testing.T) {
	// What tput emits for common terminals, when tput is there; otherwise
	// the xterm sequences written out.
	seq := func(fallback string, args ...string) string {
		if _, err := exec.LookPath("tput"); err == nil {
			cmd := exec.Command("tput", args...)
			cmd.Env = append(os.Environ(), "TERM=xterm")
			if out, err := cmd.Output(); err == nil && len(out) > 0 {
				return string(out)
			}
		}
		return fallback
	}
	clear := seq("\x1b[H\x1b[2J", "clear")
	cup := seq("\x1b[6;11H", "cup", "5", "10")
	civis := seq("\x1b[?25l", "civis")
	cnorm := seq("\x1b[?12l\x1b[?25h", "cnorm")
	el := seq("\x1b[K", "el")
	cuu1 := seq("\x1b[A", "cuu1")
	bold := seq("\x1b[1m", "bold")
	sgr0 := seq("\x1b(B\x1b[m", "sgr0")
	smcup := seq("\x1b[?1049h\x1b[22;0;0t", "smcup")
	rmcup := seq("\x1b[?1049l\x1b[23;0;0t", "rmcup")

	in := smcup + clear + civis + cup + bold + "title" + sgr0 + "\n" +
		"step 1" + "\n" + cuu1 + "\r" + el + "step 2\n" + cnorm + rmcup + "done\n"
	got := Clean([]byte(in))
	checkClean(t, []byte(in), got)
	// Moving up is not followed (that needs a whole screen), so the line
	// redrawn after it is a new line rather than a replacement.
	if want := "title\nstep 1\nstep 2\ndone\n"; got != want {
		t.Errorf("Clean(%q) = %q, want %q", in, got, want)
	}
}
