package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shellAccount is a fresh account's home in which the completion install
// line of one shell has run, and a tmux server whose one pane runs that
// shell interactively, reading the account's start-up files.
type shellAccount struct {
	t    *testing.T
	w    *world
	home string
	sock string
	env  []string
}

// needShell skips a test whose shell is missing, except in CI, where it
// fails: scripts/deps.sh installs them.
func needShell(t *testing.T, progs ...string) {
	t.Helper()
	for _, p := range append([]string{"tmux"}, progs...) {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (scripts/deps.sh installs it; CI=true)", p)
			}
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", p)
		}
	}
}

// installLine is the line `jobs completion --help` gives for shell.
func installLine(t *testing.T, w *world, shell string) string {
	t.Helper()
	for _, l := range strings.Split(w.ok("help", "completion"), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), shell+":"); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("jobs help completion gives no install line for %s", shell)
	return ""
}

// newShellAccount makes a fresh home (with /etc/skel's files, as a new
// account has), runs the install line of shell in it, and starts shell in
// tmux there.
func newShellAccount(t *testing.T, w *world, shell string) *shellAccount {
	t.Helper()
	home := filepath.Join(w.base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if shell == "bash" {
		skel, err := os.ReadFile("/etc/skel/.bashrc")
		if err != nil {
			// A minimal start-up file that loads bash-completion, as
			// distributions' skeletons do.
			skel = []byte(". /usr/share/bash-completion/bash_completion\n")
		}
		if err := os.WriteFile(filepath.Join(home, ".bashrc"), skel, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range w.environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "PATH", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "ZDOTDIR", "BASH_ENV", "ENV", "TMUX", "TERM":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "PATH="+filepath.Dir(jobsBin)+":"+os.Getenv("PATH"), "TERM=xterm-256color")
	// The install line runs as the user would type it; it is plain sh.
	c := exec.Command("sh", "-c", installLine(t, w, shell))
	c.Env, c.Dir = env, home
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("install line for %s: %v\n%s", shell, err, out)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	a := &shellAccount{t: t, w: w, home: home, sock: filepath.Join(w.base, "tmux-"+hex.EncodeToString(b)), env: env}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", a.sock, "kill-server").Run() })
	a.tmux("-f", "/dev/null", "new-session", "-d", "-x", "150", "-y", "40", "-c", home, shell)
	return a
}

func (a *shellAccount) tmux(args ...string) string {
	a.t.Helper()
	c := exec.Command("tmux", append([]string{"-S", a.sock}, args...)...)
	c.Env = a.env
	out, err := c.CombinedOutput()
	if err != nil {
		a.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows.
func (a *shellAccount) screen() string { return a.tmux("capture-pane", "-p") }

// keys types keys into the pane (tmux key names such as Tab, Enter, C-c).
func (a *shellAccount) keys(keys ...string) {
	a.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...)
}

// see waits until the pane matches re.
func (a *shellAccount) see(re, what string) {
	a.t.Helper()
	if !a.wait(regexp.MustCompile(re), 30*time.Second) {
		a.t.Fatalf("%s: the pane never matched %q:\n%s\nthe pane's processes:\n%s", what, re, a.screen(), a.processes())
	}
}

// wait reports whether the pane matches rx within d.
func (a *shellAccount) wait(rx *regexp.Regexp, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !rx.MatchString(a.screen()) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// processes lists the pane's shell and its descendants with their states,
// to tell a shell that is slow to start from one that waits for a key.
func (a *shellAccount) processes() string {
	pid := strings.TrimSpace(a.tmux("display-message", "-p", "-t", "0", "#{pane_pid}"))
	out, _ := exec.Command("ps", "-e", "-o", "pid,ppid,stat,etime,time,wchan:20,args").CombinedOutput()
	keep := map[string]bool{pid: true}
	var b strings.Builder
	for i, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if i == 0 || len(f) > 1 && (keep[f[0]] || keep[f[1]]) {
			if len(f) > 0 {
				keep[f[0]] = true
			}
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// ready clears the command line and waits until the shell has run a
// command: every key typed before has been read, and a completion that
// ran has finished. A shell just started on a busy machine may take long
// to read its start-up files (zsh's compinit reads every completion
// function's first line), so the first command waits up to two minutes;
// if it has not run after 20 seconds it is typed again, in case the shell
// dropped what was typed while it started.
func (a *shellAccount) ready(marker string) {
	a.t.Helper()
	rx := regexp.MustCompile(`(?m)^` + marker + `-ok\s*$`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a.keys("C-u")
		a.keys("echo "+marker+"-ok", "Enter")
		if a.wait(rx, 20*time.Second) {
			break
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("the shell never ran `echo %s-ok`:\n%s\nthe pane's processes:\n%s", marker, a.screen(), a.processes())
		}
	}
	a.keys("C-l")
}

// TestCompletionInstallBash: on a fresh account with bash-completion
// installed, the install line makes bash complete the program's verbs and
// the scope's job names, not the builtin's job specs.
func TestCompletionInstallBash(t *testing.T) {
	t.Parallel()
	needShell(t, "bash")
	if _, err := os.Stat("/usr/share/bash-completion/bash_completion"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash-completion is not installed (scripts/deps.sh installs it; CI=true)")
		}
		t.Skip("bash-completion is not installed (scripts/deps.sh installs it)")
	}
	w := newWorld(t)
	w.start("--name", "uniquename", "sleep 300")
	a := newShellAccount(t, w, "bash")
	a.ready("start")
	a.keys("complete -p jobs", "Enter")
	a.see(`complete -F _jobs jobs`, "the rule for jobs")
	a.keys("jobs kill uniquen", "Tab") // long enough that no random id shares it
	a.see(`jobs kill uniquename`, "a job name completed")
	a.ready("verbs")
	a.keys("jobs sta", "Tab", "Tab")
	a.see(`start\s+status`, "the verbs listed")
	a.ready("end")
}

// TestCompletionInstallZsh: the install line makes zsh complete the
// program, and zsh's own completion of job specs (kill %<TAB>) still works.
func TestCompletionInstallZsh(t *testing.T) {
	t.Parallel()
	needShell(t, "zsh")
	w := newWorld(t)
	w.start("--name", "uniquename", "sleep 300")
	a := newShellAccount(t, w, "zsh")
	a.ready("start")
	a.keys("jobs kill uniquen", "Tab") // long enough that no random id shares it
	a.see(`jobs kill uniquename`, "a job name completed")
	a.ready("spec")
	a.keys("sleep 1000 &", "Enter")
	a.see(`\[1\] \d+`, "a shell job")
	a.ready("job")
	a.keys("kill %", "Tab")
	a.see(`kill %(1|sleep)`, "zsh's own completion of a job spec")
	a.keys("C-u", "kill %1", "Enter")
}

// TestCompletionInstallFish: with the install line, `jobs` typed in fish
// runs the program (not fish's builtin) and completes its job names.
func TestCompletionInstallFish(t *testing.T) {
	t.Parallel()
	needShell(t, "fish")
	w := newWorld(t)
	w.start("--name", "uniquename", "sleep 300")
	a := newShellAccount(t, w, "fish")
	a.ready("start")
	a.keys("jobs list", "Enter")
	a.see(`uniquename`, "jobs list from the program")
	a.ready("list")
	a.keys("jobs kill uniquen", "Tab") // long enough that no random id shares it
	a.see(`jobs kill uniquename`, "a job name completed")
	a.ready("end")
}
