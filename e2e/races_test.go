package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/protocol"
	"golang.org/x/sys/unix"
)

// ticker is a job that prints a line every 50 ms for about n × 50 ms.
func ticker(n int) []string {
	return []string{"--", "/bin/sh", "-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo line $i; i=$((i+1)); sleep 0.05; done`, n)}
}

// runShell runs script under /bin/sh in the world and returns its exit
// code, failing the test when it takes longer than d.
func (w *world) runShell(d time.Duration, script string, args ...string) (int, time.Duration) {
	w.t.Helper()
	c := exec.Command("/bin/sh", append([]string{"-c", script}, args...)...)
	c.Env = w.environ()
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	began := time.Now()
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Process.Kill()
		<-done
		w.t.Fatalf("%s: still running after %v", script, d)
	}
	return c.ProcessState.ExitCode(), time.Since(began)
}

// Row B15 guards: the auto-started supervisor's stdio is the null device
// and its log file, never the pipes of the CLI that started it, so a reader that goes away
// (head) cannot kill it with SIGPIPE; and a CLI whose reader goes away
// ends at once without touching the job.
func TestB15SIGPIPEAtBothEnds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// The job prints a few lines, then runs until the test opens its gate,
	// so it is still running after log -f | head -1 however slow that is.
	gate := filepath.Join(w.base, "go")
	gated := []string{"--", "/bin/sh", "-c", `i=0; while [ $i -lt 5 ]; do echo line $i; i=$((i+1)); done; while [ ! -e "$0" ]; do sleep 0.05; done`, gate}
	code, _ := w.runShell(30*time.Second, `"$0" start "$@" | head -c1 >/dev/null`, append([]string{jobsBin}, gated...)...)
	if code != 0 {
		t.Fatalf("start | head -c1: exit %d", code)
	}
	id := firstID(t, w)
	sup := w.supervisorPID()
	logFile := filepath.Join(protocol.RuntimeDirFor(w.run, w.dbPath()), protocol.SupervisorLogName)
	for fd, want := range []string{os.DevNull, logFile, logFile} {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", sup, fd)); err != nil || target != want {
			t.Errorf("the supervisor's fd %d is %q (%v), want %s", fd, target, err, want)
		}
	}
	w.waitOutput(id, "line 1\n")
	code, took := w.runShell(30*time.Second, `"$0" log -f "$1" | head -1 >/dev/null`, jobsBin, id)
	if code != 0 && code != 141 {
		t.Errorf("log -f | head -1: exit %d, want 0 or 141", code)
	}
	if j := w.poll(id); j.Status != "running" {
		t.Errorf("the job is %s right after log -f | head -1, want running", j.Status)
	}
	// The job is quiet now: a follower writes nothing more, and still ends
	// once its reader has gone (it used to wait for the job's next output).
	if code, _ := w.runShell(30*time.Second, `"$0" events -f | head -1 >/dev/null`, jobsBin); code != 0 && code != 141 {
		t.Errorf("events -f | head -1 with nothing more to print: exit %d, want 0 or 141", code)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Errorf("the job ended %s, want done", j.Status)
	}
	if !procAlive(sup) {
		t.Errorf("the supervisor died")
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("supervisor stdin on %s, stdout/stderr on supervise.log, alive; log -f | head -1 exit %d after %v; job done", os.DevNull, code, took.Round(time.Millisecond)))
}

// Row B16 guards: concurrent cold starts converge on one supervisor (the
// flock on default.lock decides who serves; the others exit and every CLI
// reaches the winner). Knob: JOBS_E2E_COLD_STARTS (default 20).
func TestB16ColdStartRace(t *testing.T) {
	t.Parallel()
	n := int(envInt64("JOBS_E2E_COLD_STARTS", 20))
	w := newWorld(t)
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = w.jobs("start", "--", "true")
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range results {
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%v", r)
			continue
		}
		ids[strings.TrimSpace(r.stdout)] = true
	}
	d := w.sqlDB()
	var jobs, sups, jobSups int
	if err := d.QueryRow(`SELECT count(*), count(DISTINCT supervisor_id) FROM jobs`).Scan(&jobs, &jobSups); err != nil {
		t.Fatal(err)
	}
	if err := d.QueryRow(`SELECT count(*) FROM supervisors`).Scan(&sups); err != nil {
		t.Fatal(err)
	}
	if len(ids) != n || jobs != n {
		t.Errorf("%d distinct ids printed, %d jobs stored; want %d", len(ids), jobs, n)
	}
	if sups != 1 || jobSups != 1 {
		t.Errorf("%d supervisors registered, jobs spread over %d; want 1", sups, jobSups)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d concurrent cold starts: %d jobs, %d supervisor, 0 errors", n, jobs, sups))
}

// Row B2 guards: a job belongs to the supervisor, not to the CLI that asked
// for it (the supervisor carries a start through under
// context.WithoutCancel and answers each connection in its own handler,
// which closes when the client vanishes, even in the middle of a write
// blocked on a job that does not read), so SIGKILL of `start --wait`, of
// `start` right after its request, of `log -f` or of a blocked `write`
// leaves the job running to done and the supervisor's descriptors at their
// baseline.
func TestB2CLIKilled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	warm := w.start("--", "true")
	w.waitTerminal(warm, 30*time.Second)
	sup := w.supervisorPID()
	// Counted without the database files: the connection pool may keep
	// one more connection after a busy moment; it is bounded by the pool,
	// not by the clients. Nor the output spool beside the database, which
	// the appender opens once a flush waits for the write lock (a loaded
	// machine) and keeps while output waits in it: one file, the
	// appender's, not the clients'.
	spool := filepath.Join(filepath.Dir(w.dbPath()), ".jobs-spool-")
	nonDB := func() int { return fdCount(t, sup, "") - fdCount(t, sup, w.dbPath()) - fdCount(t, sup, spool) }
	base := nonDB()
	baseList := fdList(sup)

	// start --wait, killed mid-stream.
	c := w.cmd(append([]string{"start", "--wait"}, ticker(40)...)...)
	var out lockedBuffer
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "start --wait to stream", func() bool { return strings.Contains(out.String(), "line 2\n") })
	c.Process.Kill()
	c.Wait()
	streamed := firstID(t, w)

	// start, killed as soon as its job exists.
	d := w.sqlDB()
	count := func() int {
		var n int
		if err := d.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	c = w.cmd(append([]string{"start"}, ticker(20)...)...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the job row", func() bool { return count() > before })
	c.Process.Kill()
	c.Wait()
	var started string
	var status string
	if err := d.QueryRow(`SELECT id, status FROM jobs ORDER BY created_at DESC LIMIT 1`).Scan(&started, &status); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the job to leave starting", func() bool {
		if err := d.QueryRow(`SELECT status FROM jobs WHERE id = ?`, started).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status != "starting"
	})

	// log -f, killed while following.
	c = w.cmd("log", "-f", streamed)
	out = lockedBuffer{}
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "log -f to print", func() bool { return strings.Contains(out.String(), "line") })
	c.Process.Kill()
	c.Wait()

	// write with no deadline to a job that never reads, killed while it
	// blocks: the supervisor lets go of the write and its connection.
	stuck := w.start(helper("ready-idle")...)
	w.waitOutput(stuck, "ready")
	sockets := idleSockets(t, sup)
	sj, _ := w.status(stuck)
	// One request larger than the pipe: once the pipe is full, the
	// supervisor is inside that request's write, blocked.
	c = w.cmd("write", "--timeout", "0", stuck, strings.Repeat("x", 100<<10))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job's stdin pipe to fill", func() bool { return pipeFill(t, sj.PID) >= 64<<10 })
	c.Process.Kill()
	c.Wait()
	var left int
	deadline := time.Now().Add(patience)
	for left = fdCount(t, sup, "socket:"); left > sockets && time.Now().Before(deadline); left = fdCount(t, sup, "socket:") {
		time.Sleep(10 * time.Millisecond)
	}
	if left > sockets {
		t.Errorf("the supervisor still holds the connection of a killed write to a job that does not read")
	}
	if j := w.poll(stuck); j.Status != "running" {
		t.Errorf("the job that does not read is %s after its writer was killed", j.Status)
	}
	w.ok("kill", stuck, "--grace", "100ms")

	for _, id := range []string{streamed, started} {
		if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
			t.Errorf("job %s ended %s after its CLI was killed, want done", id, j.Status)
		}
	}
	var fds int
	deadline = time.Now().Add(time.Minute)
	for fds = nonDB(); fds > base && time.Now().Before(deadline); fds = nonDB() {
		time.Sleep(10 * time.Millisecond)
	}
	if fds > base {
		t.Errorf("the supervisor holds %d descriptors besides its database files, %d before the CLIs were killed:\nbefore: %s\nnow:    %s", fds, base, baseList, fdList(sup))
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("4 CLIs SIGKILLed (start --wait, start after its request, log -f, a blocked write): jobs done, left starting in time; supervisor fds (database files aside) %d → %d", base, fds))
}

// fdList describes pid's open descriptors, for a failure message.
func fdList(pid int) string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	var b strings.Builder
	for _, e := range ents {
		target, _ := os.Readlink(dir + "/" + e.Name())
		fmt.Fprintf(&b, "%s→%s ", e.Name(), target)
	}
	return b.String()
}

// pipeFill returns how many bytes wait unread in the pipe that is pid's
// stdin.
func pipeFill(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/0", pid)) // another reader of the same pipe; it reads nothing
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
