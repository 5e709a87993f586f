package e2e

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Row B17 guards: the supervisor sheds what its launcher gave it (closes
// inherited descriptors above stderr, un-ignores SIGHUP and SIGINT) before
// it starts jobs, so a job gets fds 0–2 only and default signal
// dispositions, the launcher's pipe closes when the CLI exits, and a job
// holds no lock of the supervisor's.
func TestB17NothingLeaksIntoChildren(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	// The job reports its own descriptors and ignored signals, then lives on.
	// (No pipe or command substitution: the shell would hold its ends.)
	script := `echo fds:; ls -1 /proc/$$/fd; echo end; grep SigIgn /proc/$$/status; exec sleep 600`
	// The launcher: SIGHUP ignored (as under nohup) and an extra
	// descriptor (fd 3, the write end of the test's pipe) open, as a shell
	// with a redirection gives.
	launcher := exec.Command("/bin/sh", "-c", `trap "" HUP; exec "$0" start --no-stdin --ttl 0 -- /bin/sh -c "$1"`, jobsBin, script)
	launcher.Env = w.environ()
	launcher.ExtraFiles = []*os.File{pw}
	out, err := launcher.Output()
	pw.Close()
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	id := strings.TrimSpace(string(out))

	// The launcher's pipe reaches end of file once the CLI is gone: no
	// supervisor or job holds its write end.
	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, pr)
		eof <- err
	}()
	timer := time.NewTimer(15 * time.Second)
	defer timer.Stop()
	select {
	case <-eof:
	case <-timer.C:
		t.Errorf("the launcher's pipe is still held open 15 s after the CLI exited")
	}

	log := w.waitOutput(id, "SigIgn")
	j, _ := w.status(id)
	if j.PID > 0 {
		if _, start, ok := procState(j.PID); ok {
			defer killLeftover(j.PID, start)
		}
	}
	var sigIgn string
	_, rest, _ := strings.Cut(log, "fds:\n")
	list, _, _ := strings.Cut(rest, "end\n")
	fds := strings.Join(strings.Fields(list), " ")
	for _, line := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			sigIgn = strings.TrimSpace(v)
		}
	}
	if fds != "0 1 2" {
		t.Errorf("the job's descriptors are %q, want 0 1 2", fds)
	}
	if strings.Trim(sigIgn, "0") != "" {
		t.Errorf("the job starts with ignored signals: SigIgn %s", sigIgn)
	}

	// The job's descriptors hold no lock: the supervisor's lock is free as
	// soon as the supervisor is dead, while its job still runs.
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the supervisor to be gone", func() bool { return !procAlive(sup) })
	f, err := os.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var locked bool
	waitFor(t, 10*time.Second, "the dead supervisor's lock", func() bool {
		locked = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
		return locked
	})
	if !procAlive(j.PID) {
		t.Errorf("the job died with its supervisor; the lock check proves nothing")
	}
	t.Logf("MATRIX-FIGURE %s", "job fds "+fds+", SigIgn "+sigIgn+" under a nohup-like launcher with fd 3 open; launcher pipe closed at CLI exit; lock taken after SIGKILL while the job ran")
}
