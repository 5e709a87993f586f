package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

func TestExitStatus(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	tests := []struct {
		name   string
		job    db.NewJob
		status vocab.Status
		code   int
		signal string
		reason string
	}{
		{"zero", db.NewJob{Command: "exit 0"}, vocab.StatusDone, 0, "", ""},
		{"three", db.NewJob{Command: "exit 3"}, vocab.StatusFailed, 3, "", ""},
		{"argv", db.NewJob{Argv: helperArgv(t, "exit", "7")}, vocab.StatusFailed, 7, "", ""},
		{"signal", db.NewJob{Command: "kill -TERM $$"}, vocab.StatusFailed, 128 + int(syscall.SIGTERM), "SIGTERM", "killed by SIGTERM"},
		{"not found", db.NewJob{Command: "nosuch-command-xyz"}, vocab.StatusFailed, 127, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := start(t, s, protocol.StartRequest{Job: tt.job})
			if got, want := job.Status, vocab.StatusRunning; got != want {
				t.Fatalf("status after start = %s, want %s", got, want)
			}
			if job.PID == 0 || job.PGID != job.PID || job.PIDStart == 0 {
				t.Errorf("pid %d pgid %d start %d: want own group and a start time", job.PID, job.PGID, job.PIDStart)
			}
			job = waitDone(t, s.db, job.ID, 10*time.Second)
			if got, want := job.Status, tt.status; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
			if got, want := exitCode(job), tt.code; got != want {
				t.Errorf("exit code = %d, want %d", got, want)
			}
			if got, want := job.Signal, tt.signal; got != want {
				t.Errorf("signal = %q, want %q", got, want)
			}
			if got, want := job.Reason, tt.reason; got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
			// A small command's peak is not known (0): the kernel counts
			// the supervisor's memory into it (see proc.SpawnerPeakKB).
			if job.EndedAt == nil || job.UserCPU < 0 || job.MaxRSSKB < 0 {
				t.Errorf("ended %v rss %d: want an end time and resource usage", job.EndedAt, job.MaxRSSKB)
			}
		})
	}
	t.Run("not found stderr", func(t *testing.T) {
		t.Parallel()
		job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "nosuch-command-xyz"}})
		waitDone(t, s.db, job.ID, 10*time.Second)
		if got := string(output(t, s.db, job.ID, logs.Stderr)); !strings.Contains(got, "not found") {
			t.Errorf("stderr = %q, want the shell's 'not found'", got)
		}
	})
}

func TestOutputByteExact(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	const n = 700_000
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "spew", strconv.Itoa(n), "42")}})
	job = waitDone(t, s.db, job.ID, 20*time.Second)
	if job.Status != vocab.StatusDone {
		t.Fatalf("status %s (%s)", job.Status, job.Reason)
	}
	if got, want := job.OutputBytes, int64(2*n); got != want {
		t.Errorf("output bytes = %d, want %d", got, want)
	}
	if got, want := output(t, s.db, job.ID, logs.Stdout), pattern(n, 42); !bytes.Equal(got, want) {
		t.Errorf("stdout differs: %d bytes, want %d", len(got), len(want))
	}
	if got, want := output(t, s.db, job.ID, logs.Stderr), pattern(n, 43); !bytes.Equal(got, want) {
		t.Errorf("stderr differs: %d bytes, want %d", len(got), len(want))
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	job := start(t, s, protocol.StartRequest{
		Job:     db.NewJob{Command: `echo "$JOBS_ID $JOBS_SCOPE $NO_COLOR $TERM $PAGER $GIT_PAGER $FOO"; pwd`, Scope: "agent1", Cwd: "/"},
		Env:     []string{"FOO=bar", "TERM=xterm"},
		BaseEnv: []string{"PATH=/usr/bin:/bin", "JOBS_ID=outer"},
	})
	waitDone(t, s.db, job.ID, 10*time.Second)
	if got, want := string(output(t, s.db, job.ID, "")), job.ID+" agent1 1 xterm cat cat bar\n/\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
	if got, want := strings.Join(job.EnvNames, ","), "FOO,TERM"; got != want {
		t.Errorf("env names = %q, want %q", got, want)
	}
	color := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: `echo "[$NO_COLOR]"`, Color: true}, BaseEnv: []string{}})
	waitDone(t, s.db, color.ID, 10*time.Second)
	if got, want := string(output(t, s.db, color.ID, "")), "[]\n"; got != want {
		t.Errorf("color output = %q, want %q", got, want)
	}
	// A pipe job gets PYTHONUNBUFFERED=1 unless its caller set it.
	for _, c := range []struct {
		base []string
		want string
	}{
		{[]string{"PATH=/usr/bin:/bin"}, "[1]\n"},
		{[]string{"PATH=/usr/bin:/bin", "PYTHONUNBUFFERED="}, "[]\n"},
	} {
		j := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: `echo "[$PYTHONUNBUFFERED]"`}, BaseEnv: c.base})
		waitDone(t, s.db, j.ID, 10*time.Second)
		if got := string(output(t, s.db, j.ID, "")); got != c.want {
			t.Errorf("PYTHONUNBUFFERED with caller env %v: %q, want %q", c.base, got, c.want)
		}
	}
}

// A grandchild that keeps the pipes open must not keep the job running.
func TestBackgroundGrandchildDoesNotHoldJob(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	began := time.Now()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 999 & echo hi"}})
	// Ending at all is the outcome: the grandchild sleeps 999 s.
	job = waitDone(t, s.db, job.ID, 60*time.Second)
	t.Logf("the job ended %s after its start, its grandchild still holding the pipes", time.Since(began).Round(time.Millisecond))
	if got, want := job.Status, vocab.StatusDone; got != want {
		t.Errorf("status = %s, want %s", got, want)
	}
	if got, want := string(output(t, s.db, job.ID, "")), "hi\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
	// The sleep still runs; kill on the finished job ends it.
	leftovers, err := proc.FindByEnv(protocol.EnvJobID, job.ID)
	if err != nil || len(leftovers) != 1 {
		t.Fatalf("leftovers = %v, %v; want the sleep", leftovers, err)
	}
	res, err := s.Kill(context.Background(), job.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyDone || res.Status != vocab.StatusDone || len(res.Signalled) != 1 || res.Signalled[0] != leftovers[0].PID {
		t.Errorf("kill = %+v, want already done with the sleep %d signalled", res, leftovers[0].PID)
	}
	if proc.Alive(leftovers[0].PID, leftovers[0].StartTime) {
		t.Errorf("sleep %d survived the kill", leftovers[0].PID)
	}
	again, err := s.Kill(context.Background(), job.ID, 0)
	if err != nil || !again.AlreadyDone || len(again.Signalled) != 0 {
		t.Errorf("second kill = %+v, %v; want nothing to do", again, err)
	}
}

func TestKillTreeWithGrandchildren(t *testing.T) {
	t.Parallel()
	// Both modes end through the one kill path: a pipe job's group, and a
	// pty job's session (whose leader leads the group too), with a
	// grandchild that left it found by its tag.
	for _, mode := range []string{vocab.ModePipe, vocab.ModePTY} {
		t.Run(mode, func(t *testing.T) {
			s := startSupervisor(t, Config{})
			job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "fork-grandchild"), Mode: mode}})
			out := waitOutput(t, s, job.ID, "\n")
			var a, b int
			if _, err := fmtSscanf(out, "pids %d %d", &a, &b); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			procs := map[int]int64{job.PID: job.PIDStart}
			for _, pid := range []int{a, b} {
				st, err := proc.StartTime(pid)
				if err != nil {
					t.Fatalf("grandchild %d: %v", pid, err)
				}
				procs[pid] = st
			}
			res, err := s.Kill(context.Background(), job.ID, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.AlreadyDone || res.Status != vocab.StatusKilled || len(res.Survivors) != 0 {
				t.Errorf("kill = %+v, want killed, no survivors", res)
			}
			for pid, st := range procs {
				if proc.Alive(pid, st) {
					t.Errorf("process %d survived", pid)
				}
				if mode == vocab.ModePipe && !containsInt(res.Signalled, pid) {
					t.Errorf("process %d not in signalled %v", pid, res.Signalled)
				}
			}
			job = waitDone(t, s.db, job.ID, 30*time.Second)
			if got, want := job.Status, vocab.StatusKilled; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
			if got, want := job.Signal, "SIGTERM"; mode == vocab.ModePipe && got != want {
				t.Errorf("signal = %q, want %q", got, want)
			}
		})
	}
}

func TestKillEscalatesAfterGrace(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "ignore-sigterm")}})
	waitOutput(t, s, job.ID, "ready")
	began := time.Now()
	res, err := s.Kill(context.Background(), job.ID, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 200*time.Millisecond {
		t.Errorf("kill took %s, less than the grace", took)
	}
	if !res.Escalated || res.Status != vocab.StatusKilled {
		t.Errorf("kill = %+v, want escalated and killed", res)
	}
	job, _ = s.db.FindJobByID(context.Background(), job.ID)
	if got, want := exitCode(job), 128+int(syscall.SIGKILL); got != want {
		t.Errorf("exit code = %d, want %d", got, want)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Timeout: 300 * time.Millisecond}})
	job = waitDone(t, s.db, job.ID, 5*time.Second)
	if got, want := job.Status, vocab.StatusTimedOut; got != want {
		t.Errorf("status = %s, want %s", got, want)
	}
	if !strings.Contains(job.Reason, "timed out after 300ms") {
		t.Errorf("reason = %q", job.Reason)
	}
}

// TestTimeoutGrace: a start's TimeoutGrace, not the supervisor's grace,
// is the time between the timeout's SIGTERM and its SIGKILL.
func TestTimeoutGrace(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{Grace: 100 * time.Millisecond})
	// The shell ignores SIGTERM, and sleep inherits that: only the
	// SIGKILL ends them. The timeout leaves the shell the time to get
	// there on a loaded machine; the output says it did.
	const timeout, grace = 2 * time.Second, 1500 * time.Millisecond
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "trap '' TERM; echo ready; exec sleep 60", Timeout: timeout}, TimeoutGrace: grace})
	job = waitDone(t, s.db, job.ID, 60*time.Second)
	if got := string(output(t, s.db, job.ID, "")); got != "ready\n" {
		t.Fatalf("output %q: the shell did not get to ignore SIGTERM before its timeout", got)
	}
	if got, want := job.Status, vocab.StatusTimedOut; got != want {
		t.Errorf("status = %s, want %s", got, want)
	}
	if got, want := exitCode(job), 128+int(syscall.SIGKILL); got != want {
		t.Errorf("exit code = %d, want %d (SIGKILL after the grace)", got, want)
	}
	if lived := job.EndedAt.Sub(*job.StartedAt); lived < timeout+grace-100*time.Millisecond {
		t.Errorf("ended %s after it started, before its timeout and grace (%s + %s) were through", lived, timeout, grace)
	}
	for _, req := range []protocol.StartRequest{
		{Job: db.NewJob{Command: "true"}, TimeoutGrace: -time.Second},
		{Job: db.NewJob{Command: "true", Mode: "tmux"}, TmuxPrefix: "a.b:"},
	} {
		if _, err := s.Start(context.Background(), req); !errors.Is(err, vocab.ErrInvalid) {
			t.Errorf("start with grace %s, tmux prefix %q: %v, want vocab.ErrInvalid", req.TimeoutGrace, req.TmuxPrefix, err)
		}
	}
}

func TestWriteAndEOF(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	ctx := context.Background()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "read-stdin")}})
	if _, err := s.Write(ctx, job.ID, []byte("hello\n"), false, 0); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, s, job.ID, "hello\n")
	if _, err := s.Write(ctx, job.ID, []byte("bye\n"), true, 0); err != nil {
		t.Fatal(err)
	}
	job = waitDone(t, s.db, job.ID, 5*time.Second)
	if got, want := string(output(t, s.db, job.ID, "")), "hello\nbye\neof\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
	if got, want := job.Stdin, "closed"; got != want {
		t.Errorf("stdin = %q, want %q", got, want)
	}
	if _, err := s.Write(ctx, job.ID, []byte("late"), false, 0); !errors.Is(err, vocab.ErrNotRunning) {
		t.Errorf("write to a finished job: %v, want vocab.ErrNotRunning", err)
	}

	// Closed while the job still runs.
	job = start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "cat; echo read-all; sleep 300"}})
	if _, err := s.Write(ctx, job.ID, nil, true, 0); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, s, job.ID, "read-all")
	if _, err := s.Write(ctx, job.ID, []byte("x"), false, 0); !errors.Is(err, vocab.ErrStdinClosed) {
		t.Errorf("write after eof: %v, want vocab.ErrStdinClosed", err)
	}
	// No stdin at all.
	null := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "cat; sleep 300", Stdin: "null"}})
	if _, err := s.Write(ctx, null.ID, []byte("x"), false, 0); !errors.Is(err, vocab.ErrStdinClosed) {
		t.Errorf("write to a null stdin: %v, want vocab.ErrStdinClosed", err)
	}
	if _, err := s.Write(ctx, "nosuchjob", []byte("x"), false, 0); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("write to a missing job: %v, want vocab.ErrNotFound", err)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	missing := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name   string
		job    db.NewJob
		reason string
	}{
		{"missing cwd", db.NewJob{Command: "true", Cwd: missing}, "cwd " + missing + ": no such file or directory"},
		{"argv not found", db.NewJob{Argv: []string{"nosuch-command-xyz", "a"}}, "nosuch-command-xyz: command not found"},
		{"argv not executable", db.NewJob{Argv: []string{"/etc/passwd"}}, "/etc/passwd: permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := s.Start(context.Background(), protocol.StartRequest{Job: tt.job})
			if err != nil {
				t.Fatalf("start: %v (want a failed job, not an error)", err)
			}
			if got, want := job.Status, vocab.StatusFailed; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
			if got, want := job.Reason, tt.reason; got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
		})
	}
	for _, req := range []protocol.StartRequest{
		{Job: db.NewJob{Command: "  "}},
		{Job: db.NewJob{Command: "true"}, Env: []string{"NOEQUALS"}},
		{Job: db.NewJob{Command: "true", Timeout: -time.Second}},
	} {
		if _, err := s.Start(context.Background(), req); !errors.Is(err, vocab.ErrInvalid) {
			t.Errorf("start %+v: %v, want vocab.ErrInvalid", req, err)
		}
	}
}

func TestNameReplaceAndLimits(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{Limits: db.Limits{PerScope: 2}})
	ctx := context.Background()
	first := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Name: "web"}})
	_, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Name: "web"}})
	var taken *vocab.NameTakenError
	if !errors.As(err, &taken) || taken.ID != first.ID {
		t.Fatalf("second start with the name: %v, want NameTakenError naming %s", err, first.ID)
	}
	second := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Name: "web"}, Replace: true})
	if got, _ := s.db.FindJobByID(ctx, first.ID); got.Status != vocab.StatusKilled {
		t.Errorf("replaced job status = %s, want killed", got.Status)
	}
	if second.Status != vocab.StatusRunning {
		t.Errorf("replacement status = %s", second.Status)
	}
	start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	if _, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}}); !errors.Is(err, vocab.ErrLimit) {
		t.Errorf("third running job: %v, want vocab.ErrLimit", err)
	}
}

func TestSignalStopCont(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	ctx := context.Background()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "sleep")}})
	state := func() byte {
		info, err := proc.Inspect(job.PID)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}
	pids, err := s.Signal(ctx, job.ID, "STOP")
	if err != nil || !containsInt(pids, job.PID) {
		t.Fatalf("STOP: %v, %v", pids, err)
	}
	eventually(t, 30*time.Second, "stopped", func() bool { return state() == 'T' })
	if _, err := s.Signal(ctx, job.ID, "cont"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "running again", func() bool { return state() != 'T' })
	if _, err := s.Signal(ctx, job.ID, "NOPE"); !errors.Is(err, vocab.ErrInvalid) {
		t.Errorf("bad signal: %v, want vocab.ErrInvalid", err)
	}
	// A stopped job still dies on kill: SIGCONT follows SIGTERM.
	s.Signal(ctx, job.ID, "STOP")
	res, err := s.Kill(ctx, job.ID, 2*time.Second)
	if err != nil || res.Escalated || res.Status != vocab.StatusKilled {
		t.Errorf("kill of a stopped job = %+v, %v; want killed by SIGTERM", res, err)
	}
	if _, err := s.Signal(ctx, job.ID, "INT"); !errors.Is(err, vocab.ErrNotRunning) {
		t.Errorf("signal to a finished job: %v, want vocab.ErrNotRunning", err)
	}
}

func TestTwoSupervisorsShareADatabase(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	dir := runtimeDir(t)
	s1 := startSupervisor(t, Config{DB: d, RuntimeDir: dir})
	s2 := startSupervisor(t, Config{DB: d, RuntimeDir: dir})
	ctx := context.Background()
	j1 := start(t, s1, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	j2 := start(t, s2, protocol.StartRequest{Job: db.NewJob{Command: "echo two"}})
	waitDone(t, d, j2.ID, 5*time.Second)
	if n, err := sweep.Lost(ctx, d, nil); err != nil || n != 0 {
		t.Errorf("sweep with both alive = %d, %v; want 0", n, err)
	}
	// s2 does not own j1: the kill goes to s1 over its socket.
	res, err := s2.Kill(ctx, j1.ID, 0)
	if err != nil || res.Status != vocab.StatusKilled || res.AlreadyDone {
		t.Errorf("kill through the other supervisor = %+v, %v", res, err)
	}
	if got := waitDone(t, d, j1.ID, time.Second); got.SupervisorID != s1.ID() {
		t.Errorf("job supervisor = %s, want %s", got.SupervisorID, s1.ID())
	}
}

func TestSweepLostAfterSupervisorDies(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	dir := runtimeDir(t)
	local := startSupervisor(t, Config{DB: d, RuntimeDir: dir})
	ctx := context.Background()

	cmd := exec.Command(testExe(t), "helper", "supervisor", d.Path, dir)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The lock file of the helper is its proof of life; wait for its job.
	var supID, jobID string
	eventually(t, 10*time.Second, "helper supervisor to start its job", func() bool {
		jobs, _ := d.FindJobs(ctx, db.Filter{AllScopes: true, Statuses: []vocab.Status{vocab.StatusRunning}})
		for _, j := range jobs {
			if j.SupervisorID != local.ID() {
				supID, jobID = j.SupervisorID, j.ID
				return true
			}
		}
		return false
	})
	if n, _ := sweep.Lost(ctx, d, nil); n != 0 {
		t.Fatalf("sweep while the helper lives marked %d jobs", n)
	}
	cmd.Process.Kill()
	cmd.Wait()

	n, err := sweep.Lost(ctx, d, nil)
	if err != nil || n != 1 {
		t.Fatalf("sweep after the helper died = %d, %v; want 1", n, err)
	}
	job, _ := d.FindJobByID(ctx, jobID)
	if job.Status != vocab.StatusLost || job.Reason != "supervisor "+supID+" died" {
		t.Errorf("job = %s %q, want lost by supervisor %s", job.Status, job.Reason, supID)
	}
	if sup, _ := d.FindSupervisor(ctx, supID); sup.EndedAt != nil {
		t.Errorf("the sweep recorded the dead supervisor's end: that is for a supervisor, once it ran the hooks left due")
	}
	local.hooks.runDueHooks(ctx, local.hooks.deadSupervisors(ctx))
	if sup, _ := d.FindSupervisor(ctx, supID); sup.EndedAt == nil {
		t.Errorf("dead supervisor has no end time after a supervisor's look for due hooks")
	}
	if n, _ := sweep.Lost(ctx, d, nil); n != 0 {
		t.Errorf("second sweep marked %d", n)
	}
	// Its process still runs, untouched; kill ends it.
	if !proc.Alive(job.PID, job.PIDStart) {
		t.Fatalf("the lost job's process %d is gone before the kill", job.PID)
	}
	res, err := local.Kill(ctx, jobID, 0)
	if err != nil || !res.AlreadyDone || res.Status != vocab.StatusLost || !containsInt(res.Signalled, job.PID) {
		t.Errorf("kill of the lost job = %+v, %v", res, err)
	}
	if proc.Alive(job.PID, job.PIDStart) {
		t.Errorf("the lost job's process %d survived", job.PID)
	}
}

func TestKillMarksLostWhenOwnerDied(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	dir := runtimeDir(t)
	local := startSupervisor(t, Config{DB: d, RuntimeDir: dir})
	ctx := context.Background()
	cmd := exec.Command(testExe(t), "helper", "supervisor", d.Path, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var job db.Job
	eventually(t, 10*time.Second, "helper job", func() bool {
		jobs, _ := d.FindJobs(ctx, db.Filter{AllScopes: true, Statuses: []vocab.Status{vocab.StatusRunning}})
		if len(jobs) == 1 {
			job = jobs[0]
		}
		return len(jobs) == 1
	})
	cmd.Process.Kill()
	cmd.Wait()
	res, err := local.Kill(ctx, job.ID, 0)
	if err != nil || res.Status != vocab.StatusLost || !containsInt(res.Signalled, job.PID) {
		t.Errorf("kill = %+v, %v; want lost and its process signalled", res, err)
	}
}

func TestDefaultLockAndIdleExit(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	dir := runtimeDir(t)
	// The lock: a second default supervisor is refused while the first
	// lives (no idle exit here, so that a loaded machine cannot end the
	// first one before the second tries).
	first := startSupervisor(t, Config{DB: d, RuntimeDir: dir, Default: true, IdleExit: 0})
	other, _ := New(Config{DB: d, RuntimeDir: dir, Default: true})
	if err := other.Open(context.Background()); !errors.Is(err, vocab.ErrDefaultRunning) {
		t.Fatalf("second default supervisor: %v, want vocab.ErrDefaultRunning", err)
	}
	c, err := protocol.Dial(context.Background(), filepath.Join(dir, "default.sock"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Idle exit: a running job keeps the supervisor alive past IdleExit;
	// once it ends, the supervisor exits. The job waits for a gate, so it
	// runs as long as the test needs. A supervisor that idled out before
	// the job could start (a loaded machine) is replaced and tried again.
	gate := filepath.Join(t.TempDir(), "go")
	var s *Supervisor
	var job db.Job
	for try := 0; ; try++ {
		s = startSupervisor(t, Config{DB: d, RuntimeDir: dir, Default: true, IdleExit: 300 * time.Millisecond})
		job, err = s.Start(context.Background(), protocol.StartRequest{Job: db.NewJob{Command: "while [ ! -e '" + gate + "' ]; do sleep 0.05; done"}})
		if err == nil {
			break
		}
		if !errors.Is(err, vocab.ErrSupervisorClosed) || try == 20 {
			t.Fatalf("start: %v", err)
		}
	}
	select {
	case <-s.Done():
		t.Fatal("idle exit while a job runs")
	case <-time.After(3 * 300 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		t.Fatal("no idle exit")
	}
	if got := waitDone(t, d, job.ID, 30*time.Second); got.Status != vocab.StatusDone {
		t.Errorf("job status %s", got.Status)
	}
	if sup, _ := d.FindSupervisor(context.Background(), s.ID()); sup.EndedAt == nil || protocol.SupervisorAlive(sup) {
		t.Errorf("supervisor after idle exit: ended %v", sup.EndedAt)
	}
	if _, err := s.Start(context.Background(), protocol.StartRequest{Job: db.NewJob{Command: "true"}}); !errors.Is(err, vocab.ErrSupervisorClosed) {
		t.Errorf("start after idle exit: %v, want vocab.ErrSupervisorClosed", err)
	}
	startSupervisor(t, Config{DB: d, RuntimeDir: dir, Default: true})
}

func TestCloseKillsJobs(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	var exits = make(chan db.Job, 1)
	s, err := New(Config{DB: d, RuntimeDir: runtimeDir(t), Grace: 300 * time.Millisecond, OnExit: func(j db.Job) { exits <- j }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	job, _ = d.FindJobByID(context.Background(), job.ID)
	if job.Status != vocab.StatusKilled || job.Reason != "supervisor closed" {
		t.Errorf("job after close = %s %q", job.Status, job.Reason)
	}
	select {
	case j := <-exits:
		if j.ID != job.ID || j.Status != vocab.StatusKilled {
			t.Errorf("OnExit got %s %s", j.ID, j.Status)
		}
	default:
		t.Error("OnExit not called")
	}
	if _, err := os.Stat(s.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestOnExitHook(t *testing.T) {
	t.Parallel()
	// A hook's bound is long here: the test binary starting as a hook
	// on a loaded machine takes seconds. The hanging hook runs under a
	// supervisor of its own with a short bound (below).
	s := startSupervisor(t, Config{HookTimeout: time.Minute})
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "env.json")
	hook := textclean.ShellQuote(testExe(t)) + " helper dump-env " + textclean.ShellQuote(file)
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{
		Command: `printf '\033[31mred\033[0m\n10%%\r50%%\r100%%\n'; exit 3`,
		Name:    "hooked",
		OnExit:  hook,
	}})
	var env map[string]string
	eventually(t, 10*time.Second, "hook output", func() bool {
		b, err := os.ReadFile(file)
		return err == nil && json.Unmarshal(b, &env) == nil
	})
	want := map[string]string{
		"JOBS_ID": job.ID, "JOBS_NAME": "hooked", "JOBS_STATUS": "failed",
		"JOBS_EXIT_CODE": "3", "JOBS_OUTPUT_TAIL": "red\n100%\n",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if ms, err := strconv.Atoi(env["JOBS_DURATION_MS"]); err != nil || ms < 0 {
		t.Errorf("JOBS_DURATION_MS = %q", env["JOBS_DURATION_MS"])
	}
	hookEvent := func(s *Supervisor, id string) map[string]any {
		var detail map[string]any
		eventually(t, 90*time.Second, "hook event", func() bool {
			evs, _ := s.db.Events(ctx, db.EventFilter{AllScopes: true, JobID: id})
			for _, e := range evs {
				// The first hook event claims the run; the second
				// says how it went.
				if e.Kind == "hook" && json.Unmarshal(e.Detail, &detail) == nil && detail["state"] == "finished" {
					return true
				}
			}
			return false
		})
		return detail
	}
	if d := hookEvent(s, job.ID); d["ok"] != true {
		t.Errorf("hook event = %v, want ok", d)
	}

	// A failing and a hanging hook are recorded and change nothing.
	short := startSupervisor(t, Config{HookTimeout: 2 * time.Second})
	for _, tt := range []struct {
		s          *Supervisor
		hook, want string
	}{
		{s, "echo oops >&2; exit 4", "oops"},
		{short, "sleep 300", "killed after 2s"},
	} {
		s := tt.s
		job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "true", OnExit: tt.hook}})
		d := hookEvent(s, job.ID)
		if d["ok"] != false || !strings.Contains(fmt.Sprint(d["output"], d["error"]), tt.want) {
			t.Errorf("hook %q event = %v, want failure with %q", tt.hook, d, tt.want)
		}
		if got, _ := s.db.FindJobByID(ctx, job.ID); got.Status != vocab.StatusDone {
			t.Errorf("hook %q changed the job to %s", tt.hook, got.Status)
		}
	}
}

func containsInt(list []int, x int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}

// TestOutputSpooledWhileDatabaseLocked: a child that floods and ends while
// another connection holds the write lock loses nothing: its output waits
// in the spool, its end waits for its output, and both land once the lock
// is free.
func TestOutputSpooledWhileDatabaseLocked(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{Logf: t.Logf})
	ctx := context.Background()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "read x; head -c 300000 /dev/zero"}})

	// Another connection takes the write lock and keeps it past the
	// appender's busy timeout.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, job.ID, []byte("go\n"), false, 0); err != nil {
		t.Fatal(err)
	}
	// The child is not held up: it ends while the database is locked.
	eventually(t, 10*time.Second, "the child to exit", func() bool { return !proc.Alive(job.PID, job.PIDStart) })
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	job = waitDone(t, s.db, job.ID, 20*time.Second)
	if job.Status != vocab.StatusDone || job.OutputBytes != 300000 || job.DroppedBytes != 0 {
		t.Errorf("job %s (%s), %d bytes, %d dropped; want done, 300000 bytes, none dropped", job.Status, job.Reason, job.OutputBytes, job.DroppedBytes)
	}
	var stored int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(coalesce(size, length(data))), 0) FROM chunks WHERE job_id = ?`, job.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 300000 {
		t.Errorf("%d bytes stored, want 300000", stored)
	}
	evs, err := s.db.Events(ctx, db.EventFilter{AllScopes: true, JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == "output_dropped" {
			t.Errorf("output_dropped event: %s", e.Detail)
		}
	}
}

// TestJobsHoldNoThreads: a running job costs the supervisor no OS thread
// of its own. Waiting for a child with os.Process.Wait alone blocks a
// thread in waitid for the child's whole life; awaitExit waits in the
// netpoller instead. Measured in a fresh process, whose thread count
// earlier tests have not raised.
func TestJobsHoldNoThreads(t *testing.T) {
	t.Parallel()
	const n = 40
	out, err := exec.Command(testExe(t), "helper", "threads", strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var before, after int
	if _, err := fmt.Sscan(string(out), &before, &after); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if after-before >= n/2 {
		t.Errorf("OS threads went from %d with one running job to %d with %d more", before, after, n)
	}
	t.Logf("OS threads: %d with one running job, %d with %d more", before, after, n)
}

// TestRetiredWithoutIdleExitEnds: a supervisor that never exits for
// idleness (IdleExit 0, as `jobs supervise --idle 0` and the test helper
// run it) still ends once its database file is removed and it has no
// job: nothing can reach it any more. It used to live on for ever.
func TestRetiredWithoutIdleExitEnds(t *testing.T) {
	d := openDB(t)
	s := startSupervisor(t, Config{DB: d, IdleExit: 0})
	if err := os.Remove(d.Path); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the supervisor of a removed database to end", func() bool {
		select {
		case <-s.Done():
			return true
		default:
			return false
		}
	})
}
