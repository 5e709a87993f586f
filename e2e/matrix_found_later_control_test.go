package e2e

// Rows of section E ("found later") about control: a frozen supervisor
// (E6), an escapee without the JOBS_ID cookie (E8), and a lost job whose
// process group id was reused before it was marked lost (B14).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBounded runs the binary and gives up on it after d: a run still going
// then is killed and reported hung.
func (w *world) runBounded(d time.Duration, args ...string) (r result, hung bool) {
	w.t.Helper()
	c := w.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		w.t.Fatalf("run jobs %v: %v", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(d):
		_ = c.Process.Kill()
		<-done
		return result{args: args, stdout: out.String(), stderr: errb.String(), code: -1}, true
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run jobs %v: %v", args, err)
	}
	return result{args: args, stdout: out.String(), stderr: errb.String(), code: code}, false
}

// goneOrZombie reports whether the process that started at start is gone
// (or a zombie nobody reaped yet: it runs no more).
func goneOrZombie(pid int, start int64) bool {
	st, s, ok := procState(pid)
	return !ok || s != start || st == 'Z' || st == 'X'
}

// Row E6 guards: a supervisor that is stopped (SIGSTOP) does not hang the
// verbs that need it. write says within its bound that the supervisor
// does not answer and writes nothing; poll and wait answer from the
// database; kill ends the job's processes directly (as for a lost job) and
// says which supervisor it could not reach; once the supervisor runs
// again, it records the job killed.
func TestE6FrozenSupervisorKillAndWrite(t *testing.T) {
	t.Parallel()
	const bound = 30 * time.Second // reached only on failure
	w := newWorld(t)
	id := w.start(helper("ready-idle")...)
	w.waitOutput(id, "ready")
	mainPID := w.poll(id).PID
	_, mainStart, _ := procState(mainPID)
	sup := w.supervisorPID()
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGCONT) })
	waitFor(t, bound, "the supervisor to be stopped", func() bool {
		st, _, _ := procState(sup)
		return st == 'T'
	})

	began := time.Now()
	r, hung := w.runBounded(bound, "write", id, "hi")
	wrote := time.Since(began)
	switch {
	case hung:
		t.Fatalf("write still waiting after %s on a stopped supervisor", bound)
	case r.code != 1 || !strings.Contains(r.stderr, "does not answer") || strings.Count(r.stderr, "\n") != 1:
		t.Errorf("write to a job of a stopped supervisor: %v; want exit 1 and one line saying it does not answer", r)
	}

	r, hung = w.runBounded(bound, "--json", "poll", id)
	if hung || r.code != 0 || !strings.Contains(r.stdout, `"running"`) {
		t.Errorf("poll while the supervisor is stopped (hung %t): %v", hung, r)
	}
	r, hung = w.runBounded(bound, "wait", "--timeout", "500ms", id)
	if hung || r.code == 0 {
		t.Errorf("wait --timeout while the supervisor is stopped (hung %t): %v; want the timeout's exit code", hung, r)
	}

	began = time.Now()
	r, hung = w.runBounded(bound, "--json", "kill", id, "--grace", "5s")
	killed := time.Since(began)
	if hung {
		t.Fatalf("kill still waiting after %s on a stopped supervisor", bound)
	}
	var k struct {
		killResult
		Unreached string `json:"unreached"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &k) != nil {
		t.Fatalf("kill: %v", r)
	}
	if !slices.Contains(k.Signalled, mainPID) || len(k.Survivors) != 0 || k.Unreached == "" {
		t.Errorf("kill of a job of a stopped supervisor = %+v; want its main process %d signalled, no survivor, the supervisor named", k, mainPID)
	}
	waitFor(t, bound, "the job's process to end", func() bool { return goneOrZombie(mainPID, mainStart) })

	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if j := w.waitTerminal(id, 60*time.Second); j.Status != "killed" {
		t.Errorf("once the supervisor runs again the job is %s (%s), want killed", j.Status, j.Reason)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("stopped supervisor: write refused in one line after %d ms, poll and wait answered, kill ended the job's process directly in %d ms; killed once it ran again",
		wrote.Milliseconds(), killed.Milliseconds()))
}

// cgroupOffered reports whether this machine lets this process make a
// cgroup v2 beneath its own (what a supervisor needs to give each job
// one), and why not.
func cgroupOffered() (bool, string) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false, err.Error()
	}
	rel, found := "", false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return false, "no cgroup v2 membership in /proc/self/cgroup"
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err.Error()
	}
	mount := ""
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "-"); i > 0 && i+1 < len(f) && f[i+1] == "cgroup2" && f[3] == "/" {
			mount = f[4]
		}
	}
	if mount == "" {
		return false, "no cgroup2 file system mounted"
	}
	probe := filepath.Join(mount, rel, fmt.Sprintf("jobs-e2e-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return false, "cannot make a cgroup: " + err.Error()
	}
	_ = syscall.Rmdir(probe)
	return true, ""
}

// Row E8 guards: a process that leaves the job's group and wipes its
// environment (setsid env -i) is still found and ended by kill, through the
// job's own cgroup, where the system offers one.
func TestE8EscapeeWithoutJobsIDKilled(t *testing.T) {
	t.Parallel()
	if ok, why := cgroupOffered(); !ok {
		t.Skipf("no cgroup for jobs on this machine (%s): an escapee without JOBS_ID is then not found (docs/kill.md)", why)
	}
	w := newWorld(t)
	pidFile := filepath.Join(w.base, "escapee.pid")
	id := w.start("--", "sh", "-c",
		`setsid env -i /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$1" </dev/null >/dev/null 2>&1 & echo started`, "sh", pidFile)
	var pid int
	waitFor(t, 30*time.Second, "the escapee's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	var start int64
	waitFor(t, 30*time.Second, "the escapee to exec sleep", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		_, start, _ = procState(pid)
		return strings.HasPrefix(string(b), "sleep\x00")
	})
	t.Cleanup(func() { killLeftover(pid, start) })
	if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); bytes.Contains(env, []byte("JOBS_ID=")) {
		t.Fatalf("the escapee kept JOBS_ID: %q", env)
	}
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Fatalf("job %s, want done", j.Status)
	}
	if j := w.poll(id); j.Descendants != 1 {
		t.Errorf("poll counts %d processes of the finished job, want the escapee", j.Descendants)
	}
	k := w.kill(id, "--grace", "5s")
	if !slices.Contains(k.Signalled, pid) {
		t.Errorf("kill signalled %v, want the escapee %d", k.Signalled, pid)
	}
	waitFor(t, 30*time.Second, "the escapee to end", func() bool { return goneOrZombie(pid, start) })
	t.Logf("MATRIX-FIGURE %s", "setsid env -i escapee found through the job's cgroup and ended by kill")
}

// Row B14 guards (found later): a lost job's process group id, reused by strangers
// before the job was marked lost (its main process and every member
// gone), names none of the job's processes: the strangers are not listed
// as survivors, not counted, and not signalled by kill.
func TestB14LostJobReusedGroupNeverSignalled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// A stranger group whose leader has exited: sh starts a member
	// that records every signal it gets, prints its pid and exits.
	file := filepath.Join(w.base, "signals")
	sh := exec.Command("sh", "-c", `"$0" e2e-helper trap-signals "$1" & echo "$!"`, helperBin, file)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	leader := sh.Process.Pid
	rd := bufio.NewReader(out)
	s := &stranger{file: file}
	for ready := false; s.pid == 0 || !ready; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stranger group: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "ready" {
			ready = true
		} else if n, err := strconv.Atoi(line); err == nil {
			s.pid = n
		}
	}
	_ = sh.Wait()
	_, s.start, _ = procState(s.pid)
	t.Cleanup(func() { _ = syscall.Kill(s.pid, syscall.SIGKILL) })
	if info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", leader)); len(info) > 0 {
		t.Fatalf("the stranger group's leader %d still exists", leader)
	}

	// The row: a job whose main process was that group's leader,
	// started no later than the stranger, whose supervisor died; so
	// the stranger is in the recorded group and within the recorded
	// life (lost jobs end when they are noticed).
	id := forgeRunning(t, w, leader, leader, s.start)
	if gc := w.ok("gc"); !strings.Contains(gc, "marked 1 job lost") {
		t.Errorf("gc: %q, want the job marked lost", gc)
	}
	survivors, ok := w.lostSurvivors(id)
	if j := w.poll(id); j.Status != "lost" || !ok || len(survivors) != 0 || j.Descendants != 0 {
		t.Errorf("lost job over a reused group: status %s, survivors %v (listed %t), poll counts %d; want lost, none, 0",
			j.Status, survivors, ok, j.Descendants)
	}
	k := w.kill(id, "--grace", "200ms")
	if len(k.Signalled) != 0 || len(k.Survivors) != 0 {
		t.Errorf("kill of the lost job = %+v, want nothing signalled", k)
	}
	s.untouched(t, "after gc, poll and kill")
	if !t.Failed() {
		t.Logf("MATRIX-FIGURE %s", "stranger in the lost job's reused group (leader gone): not listed, not counted, 0 signals sent")
	}
}
