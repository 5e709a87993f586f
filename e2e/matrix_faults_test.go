package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Row B7 guards: a job whose background grandchild keeps the output pipe open is finished once its main process exits and the drain wait (about 2 s) expires, with what it printed captured.
func TestB7GrandchildHoldsPipe(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	began := time.Now()
	id := w.start("--no-stdin", "--", "sh", "-c", "sleep 100 & echo hi")
	j := w.waitTerminal(id, 30*time.Second)
	took := time.Since(began)
	pid := j.PID
	// The sleep is in the job's group: end it, whatever the outcome.
	defer w.jobs("kill", id, "--grace", "100ms")
	if j.Status != "done" || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("job ended %s (exit %v), want done with 0", j.Status, j.ExitCode)
	}
	if out := w.ok("log", id); out != "hi\n" {
		t.Errorf("output %q, want \"hi\\n\"", out)
	}
	// Finished while `sleep 100` still holds the pipe: the drain bound
	// ended it, not the grandchild (the time is a figure).
	if j.Descendants < 1 {
		t.Errorf("poll counts %d processes alive while `sleep 100` (of main pid %d) runs", j.Descendants, pid)
	}
	figure(t, "`sleep 100 & echo hi`: done, exit 0, output hi, finished after %v; %d process still counted", took.Round(100*time.Millisecond), j.Descendants)
}

// Row B8 guards: a command that cannot start ends failed with its reason, straight from starting, never running, leaving no zombie; the shell form fails 127 with sh's complaint stored.
func TestB8CannotStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		reason string
	}{
		{"argv", []string{"--", "nosuchcmd", "arg"}, "not found"},
		{"non-executable", []string{"--", noexec, "arg"}, "permission denied"},
	}
	for _, c := range cases {
		began := time.Now()
		r := w.jobs(append([]string{"start", "--no-stdin"}, c.args...)...)
		id := strings.TrimSpace(r.stdout)
		if id == "" {
			t.Fatalf("%s: no job: %v", c.name, r)
		}
		j := w.waitTerminal(id, time.Minute)
		took := time.Since(began)
		_, events := w.status(id)
		if j.Status != "failed" || !strings.Contains(j.Reason, c.reason) {
			t.Errorf("%s: %s (reason %q), want failed with %q", c.name, j.Status, j.Reason, c.reason)
		}
		if len(events) != 2 || events[1].From != "starting" || events[1].To != "failed" {
			t.Errorf("%s: history%s, want created then starting→failed", c.name, eventsText(events))
		}
		t.Logf("%s: failed after %v", c.name, took.Round(time.Millisecond)) // a figure: start-up is slow on a loaded machine
	}

	// The shell form: sh runs, says why, exits 127.
	id := w.start("--no-stdin", "nosuchcmd")
	j := w.waitTerminal(id, time.Minute)
	if j.Status != "failed" || j.ExitCode == nil || *j.ExitCode != 127 {
		t.Errorf("shell form: %s (exit %v), want failed with 127", j.Status, j.ExitCode)
	}
	if out := w.ok("log", id); !strings.Contains(out, "nosuchcmd") || !strings.Contains(out, "not found") {
		t.Errorf("shell form: stored output %q, want sh's complaint", out)
	}

	// A missing working directory is refused before any job exists.
	r := w.jobs("start", "--cwd", filepath.Join(dir, "gone"), "--", "true")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ") || r.stdout != "" {
		t.Errorf("missing --cwd: %v, want one line and exit 1", r)
	}
	var n int
	if err := w.sqlDB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d jobs, want 3: the refused --cwd start made one", n)
	}

	sup := w.supervisorPID()
	var kids map[int]byte
	waitFor(t, 30*time.Second, "no child of the supervisor left", func() bool {
		kids = childrenOf(sup)
		return len(kids) == 0
	})
	figure(t, "argv, non-executable: failed starting→failed with reason; shell form: failed 127 with sh's line; missing --cwd refused with one line; 0 zombies")
}

// Row B20 guards: a job blocked reading its stdin is reported waiting_for_input from the kernel's view, and not once its input arrived.
func TestB20WaitingForInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--", "sh", "-c", "read x; echo got $x")
	began := time.Now()
	var wfi struct {
		Job struct {
			Status          string `json:"status"`
			WaitingForInput bool   `json:"waiting_for_input"`
		} `json:"job"`
	}
	pollJSON := func() {
		out := w.ok("--json", "poll", id)
		if err := jsonUnmarshal(out, &wfi); err != nil {
			t.Fatalf("poll: %v\n%s", err, out)
		}
	}
	waitFor(t, 30*time.Second, "waiting_for_input", func() bool {
		pollJSON()
		return wfi.Job.WaitingForInput
	})
	seen := time.Since(began)
	w.ok("write", id, "hi", "--eof")
	j := w.waitTerminal(id, 10*time.Second)
	pollJSON()
	if wfi.Job.WaitingForInput {
		t.Errorf("waiting_for_input still true after the input and the end (%s)", j.Status)
	}
	if out := w.ok("log", id); out != "got hi\n" {
		t.Errorf("output %q, want \"got hi\\n\"", out)
	}

	// While it runs on, after the input: no longer waiting.
	id = w.start("--", "sh", "-c", "read x; echo got $x; exec sleep 300")
	waitFor(t, 30*time.Second, "waiting_for_input", func() bool {
		out := w.ok("--json", "poll", id)
		return jsonUnmarshal(out, &wfi) == nil && wfi.Job.WaitingForInput
	})
	defer w.jobs("kill", id, "--grace", "100ms")
	w.ok("write", id, "hi\n")
	w.waitOutput(id, "got hi")
	pollJSON2 := func() bool {
		out := w.ok("--json", "poll", id)
		return jsonUnmarshal(out, &wfi) == nil && !wfi.Job.WaitingForInput && wfi.Job.Status == "running"
	}
	waitFor(t, 30*time.Second, "waiting_for_input false while the job runs on", pollJSON2)
	figure(t, "waiting_for_input true %v after start; false after `write hi --eof`; output \"got hi\"", seen.Round(10*time.Millisecond))
}

// Row D4 guards: --env values reach the child but never the database, its -wal and -shm, the supervisor's log, the events or status --json; only the names are kept, also after a crash and gc.
func TestD4NoSecretsPersisted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	done, crash := secret(t), secret(t)
	// A supervisor in the foreground, its log in a file.
	logPath := filepath.Join(w.base, "supervisor.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sv := w.cmd("supervise", "--idle", "0")
	sv.Stdout, sv.Stderr = logf, logf
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sv.Process.Kill(); _ = sv.Wait() }()
	var sup int
	waitFor(t, 10*time.Second, "the supervisor to serve", func() bool {
		if _, err := os.Stat(w.dbPath()); err != nil {
			return false
		}
		var pid int
		err := w.sqlDB().QueryRow(`SELECT pid FROM supervisors WHERE ended_at IS NULL`).Scan(&pid)
		sup = pid
		return err == nil && pid == sv.Process.Pid
	})

	// The commands check the value by its length: a command is stored.
	check := `test ${#API_KEY} -eq ` + strconv.Itoa(len(done))
	id := w.start("--env", "API_KEY="+done, "--", "sh", "-c", check+` && echo seen`)
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Fatalf("the job did not see API_KEY: %s %q", j.Status, w.ok("log", id))
	}
	crashed := w.start("--env", "API_KEY="+crash, "--", "sh", "-c", check+` && echo ready && exec sleep 60`)
	w.waitOutput(crashed, "ready")
	pid := w.poll(crashed).PID
	_, pstart, _ := procState(pid)
	defer killLeftover(pid, pstart)
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the supervisor's lock to be free", func() bool { return lockFree(lock) })
	if j := w.poll(crashed); j.Status != "lost" {
		t.Errorf("after kill -9 of its supervisor the job is %s, want lost", j.Status)
	}
	w.jobs("kill", crashed, "--grace", "100ms")
	w.ok("gc")

	var views []string
	for _, j := range []string{id, crashed} {
		st, _ := w.status(j)
		if len(st.EnvNames) != 1 || st.EnvNames[0] != "API_KEY" {
			t.Errorf("job %s: env_names %v, want [API_KEY]", j, st.EnvNames)
		}
		views = append(views, w.ok("--json", "status", j))
	}
	views = append(views, w.ok("events"))
	places := map[string][]byte{"status --json and events": []byte(strings.Join(views, "\n"))}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if b, err := os.ReadFile(w.dbPath() + suffix); err == nil {
			places[filepath.Base(w.dbPath()+suffix)] = b
		}
	}
	if b, err := os.ReadFile(logPath); err == nil {
		places["supervisor log"] = b
	}
	nameSeen := false
	for where, b := range places {
		for _, s := range []string{done, crash} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("the value of API_KEY is in %s", where)
			}
		}
		nameSeen = nameSeen || bytes.Contains(b, []byte("API_KEY"))
	}
	if !nameSeen {
		t.Errorf("the name API_KEY is nowhere")
	}
	figure(t, "API_KEY value in none of db, -wal, -shm, supervisor log, status --json, events (%d files/views) after a clean run, a kill -9 and gc; the name is kept", len(places))
}
