package cli

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmuxEnv is an env whose tmux jobs run on a private tmux server, ended
// (after the jobs and their tmux-pipe helpers) when the test ends.
func tmuxEnv(t *testing.T) (*env, string) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	e := newEnv(t)
	b := make([]byte, 6)
	rand.Read(b)
	sock := "jobs-cli-" + hex.EncodeToString(b)
	e.extra = append(e.extra, "JOBS_TMUX_SOCKET="+sock)
	t.Cleanup(func() {
		e.run2("kill", "--all", "--grace", "100ms")
		db := filepath.Join(e.state, "jobs", "jobs.db")
		deadline := time.Now().Add(time.Minute)
		for tmuxHelpers(db) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		exec.Command("tmux", "-L", sock, "kill-server").Run()
	})
	return e, sock
}

// tmuxHelpers counts the running tmux-pipe helpers of the database db.
func tmuxHelpers(db string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "\x00tmux-pipe\x00") && strings.Contains(string(b), "\x00"+db+"\x00") {
			n++
		}
	}
	return n
}

// TestTmuxDurable drives tmux jobs through the built binary: exit codes
// through wait, a job that outlives a kill -9 of its supervisor, a kept
// session, and a person attaching from inside another tmux.
func TestTmuxDurable(t *testing.T) {
	e, sock := tmuxEnv(t)

	id := e.start("--tmux", "exit 7")
	if r := e.run2("wait", id, "--timeout", "60s"); r.code != 7 {
		t.Errorf("wait on a tmux job that exits 7: %v", r)
	}
	var st struct {
		Job jobJSON `json:"job"`
	}
	e.jsonOf(&st, "status", id)
	if st := st.Job; st.Status != "failed" || st.ExitCode == nil || *st.ExitCode != 7 {
		t.Errorf("status of exit 7: %+v", st)
	}

	// The supervisor dies mid-job; the job goes on, is driven, and ends
	// with its real status and all of its output.
	// (Each command that prints waits for a key before it exits: see
	// "When a tmux job ends" in docs/tmux.md.)
	id = e.start("--tmux", `echo before; read x; echo "after $x"; read y; exit 3`)
	e.ok("wait", id, "--until", "before", "--timeout", "60s")
	sup := supervisorPID(t, e)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the supervisor to die", func() bool { return !alive(sup) })
	e.ok("list") // a reader sweeps: the tmux job must not be lost
	e.jsonOf(&st, "status", id)
	if st.Job.Status != "running" {
		t.Fatalf("tmux job is %s after its supervisor died, want running", st.Job.Status)
	}
	e.ok("send-keys", id, "--literal", "again")
	e.ok("send-keys", id, "Enter")
	e.ok("wait", id, "--until", "after again", "--timeout", "60s")
	e.ok("send-keys", id, "Enter")
	if r := e.run2("wait", id, "--timeout", "60s"); r.code != 3 {
		t.Errorf("wait after the supervisor died: %v", r)
	}
	if out := e.ok("log", id); !strings.Contains(out, "before") || !strings.Contains(out, "after again") {
		t.Errorf("log of the job that outlived its supervisor: %q", out)
	}

	// --keep-tmux leaves the session, with its last screen, after the end.
	id = e.start("--tmux", "--keep-tmux", "echo last-words; read x")
	e.ok("wait", id, "--until", "last-words", "--timeout", "60s")
	e.ok("send-keys", id, "Enter")
	e.run2("wait", id, "--timeout", "60s")
	if out, err := exec.Command("tmux", "-L", sock, "capture-pane", "-p", "-S", "-5", "-t", "=jobs-"+id+":").Output(); err != nil || !strings.Contains(string(out), "last-words") {
		t.Errorf("kept session: %v %q", err, out)
	}
	exec.Command("tmux", "-L", sock, "kill-session", "-t", "=jobs-"+id).Run()

	// A person attaches from inside their own tmux: `jobs attach` runs in
	// a pane of another server, sees the job's screen, and what the
	// person types reaches the job.
	id = e.start("--tmux", `echo attach-marker; read x; echo "typed $x"; read y`)
	e.ok("wait", id, "--until", "attach-marker", "--timeout", "60s")
	outer := sock + "-outer"
	t.Cleanup(func() { exec.Command("tmux", "-L", outer, "kill-server").Run() })
	args := []string{"-L", outer, "-f", os.DevNull, "new-session", "-d", "-s", "person", "-x", "100", "-y", "30"}
	for _, kv := range e.environ() {
		if !strings.HasPrefix(kv, "TMUX") {
			args = append(args, "-e", kv)
		}
	}
	args = append(args, "--", jobsBin, "attach", id)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("outer tmux: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "the job's screen in the person's terminal", func() bool {
		out, _ := exec.Command("tmux", "-L", outer, "capture-pane", "-p", "-t", "=person:").Output()
		return strings.Contains(string(out), "attach-marker")
	})
	exec.Command("tmux", "-L", outer, "send-keys", "-t", "=person:", "-l", "hi-from-a-person").Run()
	exec.Command("tmux", "-L", outer, "send-keys", "-t", "=person:", "Enter").Run()
	e.ok("wait", id, "--until", "typed hi-from-a-person", "--timeout", "60s")
	exec.Command("tmux", "-L", outer, "send-keys", "-t", "=person:", "Enter").Run()
	if r := e.run2("wait", id, "--timeout", "60s"); r.code != 0 {
		t.Errorf("wait after the person typed: %v", r)
	}
	if out := e.ok("log", id); !strings.Contains(out, "typed hi-from-a-person") {
		t.Errorf("log after attach: %q", out)
	}
}

// supervisorPID finds the detached supervisor of e from its runtime
// directory's default supervisor, by the pid the supervisors table keeps.
func supervisorPID(t *testing.T, e *env) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) > 2 && argv[0] == jobsBin && argv[1] == "supervise" && strings.Contains(string(b), e.state) {
			return pid
		}
	}
	t.Fatal("no supervisor found")
	return 0
}
