package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmuxWorld is a world whose tmux jobs run on a private tmux server,
// ended with the test.
func tmuxWorld(t *testing.T) (*world, string) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	w := newWorld(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	sock := "jobs-e2e-" + hex.EncodeToString(b)
	w.extra = append(w.extra, "JOBS_TMUX_SOCKET="+sock)
	t.Cleanup(func() {
		w.jobs("kill", "--all", "--grace", "100ms")
		_ = exec.Command("tmux", "-L", sock, "kill-server").Run()
	})
	return w, sock
}

// Row B18 guards: a tmux job outlives a kill -9 of its supervisor (re-adopted, not lost), its capture goes on with no gap or duplicate, its exit code comes from the dead pane, and its session is only ever addressed by its exact name.
func TestB18TmuxReadoption(t *testing.T) {
	t.Parallel()
	w, sock := tmuxWorld(t)
	const lines = 300
	// The command waits for a key before it exits, so that its last line
	// is through the pane before tmux closes it (docs/tmux.md, "When a tmux job
	// ends").
	id := w.start("--tmux", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo spew-$i; i=$((i+1)); sleep 0.01; done; read x; exit 5`, lines))
	w.waitOutput(id, "spew-20")
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the supervisor's lock to be free", func() bool { return lockFree(lock) })
	if j := w.poll(id); j.Status != "running" {
		t.Fatalf("tmux job is %s after its supervisor died, want running", j.Status)
	}
	mid, _ := w.status(id)
	// A new supervisor; the job goes on under it.
	if j := w.waitTerminal(w.start("--", "true"), 30*time.Second); j.Status != "done" {
		t.Fatalf("a new supervisor: %s", j.Status)
	}
	w.waitOutput(id, fmt.Sprintf("spew-%d\r\n", lines-1))
	w.ok("send-keys", id, "Enter")
	j := w.waitTerminal(id, 30*time.Second)
	if j.Status != "failed" || j.ExitCode == nil || *j.ExitCode != 5 {
		t.Errorf("tmux job ended %s (exit %v), want failed with 5 (from pane_dead_status)", j.Status, j.ExitCode)
	}
	_, events := w.status(id)
	for _, e := range events {
		if e.To == "lost" {
			t.Errorf("the tmux job was marked lost:%s", eventsText(events))
		}
	}
	// Every line once, in order: what the pane showed is captured whole.
	out := w.ok("log", id, "--limit", "16777216")
	next := 0
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if n, ok := strings.CutPrefix(l, "spew-"); ok && !strings.Contains(l, "$") {
			if n != fmt.Sprint(next) {
				t.Fatalf("line spew-%s where spew-%d was due (%d bytes captured before the kill)", n, next, mid.OutputBytes)
			}
			next++
		}
	}
	if next != lines {
		t.Errorf("captured %d of %d lines", next, lines)
	}

	// Exact session names: once the job's own session is gone, a session
	// whose name extends it must not be taken for it: not typed into, not
	// captured, not killed.
	id2 := w.start("--tmux", `echo ready; sleep 60`)
	w.waitOutput(id2, "ready")
	decoy := "jobs-" + id2 + "-decoy"
	if out, err := exec.Command("tmux", "-L", sock, "new-session", "-d", "-s", decoy, "cat").CombinedOutput(); err != nil {
		t.Fatalf("decoy session: %v %s", err, out)
	}
	if out, err := exec.Command("tmux", "-L", sock, "kill-session", "-t", "=jobs-"+id2).CombinedOutput(); err != nil {
		t.Fatalf("kill the job's session: %v %s", err, out)
	}
	w.jobs("send-keys", id2, "--literal", "typed-into-the-decoy")
	w.jobs("send-keys", id2, "Enter")
	if r := w.jobs("capture", id2); strings.Contains(r.stdout, "decoy") {
		t.Errorf("capture of a job whose session is gone showed another session: %v", r)
	}
	w.jobs("kill", id2, "--grace", "100ms")
	j2 := w.waitTerminal(id2, 30*time.Second)
	if j2.Status == "running" || j2.Status == "done" {
		t.Errorf("job whose session vanished: %s (reason %q)", j2.Status, j2.Reason)
	}
	if err := exec.Command("tmux", "-L", sock, "has-session", "-t", "="+decoy).Run(); err != nil {
		t.Errorf("the decoy session %s was killed: %v", decoy, err)
	} else if out, _ := exec.Command("tmux", "-L", sock, "capture-pane", "-p", "-t", "="+decoy+":").Output(); strings.Contains(string(out), "typed-into") {
		t.Errorf("keys for the job were typed into the decoy session:\n%s", out)
	}
	figure(t, "tmux job kept running through kill -9 of its supervisor; %d of %d lines captured once, in order; exit 5 from the dead pane; once a job's session vanished (job %s), keys, capture and kill never reached a session named like it",
		next, lines, j2.Status)
}
