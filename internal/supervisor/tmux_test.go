package supervisor_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/supervisor"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/tmuxpipe"
	"github.com/agentjobs/jobs/internal/vocab"
)

// The test binary is also the tmux-pipe and tmux-exec helpers that tmux
// starts for every tmux job (a supervisor's Executable defaults to os.Executable()), and a
// supervisor in its own process for the kill -9 test. The dispatch runs in
// init, before TestMain, so that it needs no hook in TestMain.
func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "tmux-pipe":
		os.Exit(tmuxPipeMain(os.Args[2:]))
	case "tmux-supervisor":
		os.Exit(tmuxSupervisorMain(os.Args[2:]))
	case "tmux-exec": // tmux-exec --env-file FILE -- ARGV…
		if len(os.Args) < 6 || os.Args[2] != "--env-file" || os.Args[4] != "--" {
			fmt.Fprintln(os.Stderr, "usage: tmux-exec --env-file FILE -- ARGV…")
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, tmuxpipe.Exec(os.Args[3], os.Args[5:]))
		os.Exit(127)
	}
}

// tmuxPipeMain is `jobs tmux-pipe --db PATH --job ID` in miniature.
func tmuxPipeMain(args []string) int {
	var dbPath, job string
	var grace time.Duration
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--db":
			dbPath = args[i+1]
		case "--job":
			job = args[i+1]
		case "--grace":
			grace, _ = time.ParseDuration(args[i+1])
		}
	}
	if err := tmuxpipe.Run(context.Background(), dbPath, job, grace, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// tmuxSupervisorMain runs a supervisor that starts one tmux job running
// the shell command args[2], prints "<supervisor id> <job id>" and waits to
// be killed.
func tmuxSupervisorMain(args []string) int {
	ctx := context.Background()
	d, err := db.Open(ctx, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := supervisor.New(supervisor.Config{DB: d, RuntimeDir: args[1]})
	if err == nil {
		err = s.Open(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	job, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: args[2], Mode: "tmux"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %s\n", s.ID(), job.ID)
	time.Sleep(time.Hour)
	return 0
}

// tmuxPatience bounds each wait on tmux in these tests. It only bounds a
// failure: on a 2-core machine running the whole suite, a tmux command
// once took over 10 s to answer.
const tmuxPatience = time.Minute

// tmuxEnvTest gives the test a private tmux server through
// JOBS_TMUX_SOCKET, and ends it (and waits for the helpers it ran) when
// the test ends. Subtests may run in parallel on it.
func tmuxEnvTest(t *testing.T) tmux.Server {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed; the tmux tests need it")
	}
	b := make([]byte, 6)
	rand.Read(b)
	srv := tmux.Server{Socket: "jobs-rt-" + hex.EncodeToString(b)}
	t.Setenv(tmuxjob.EnvSocket, srv.Socket)
	t.Cleanup(func() { killTmuxServer(t, srv) })
	return srv
}

// killTmuxServer ends a private test server and removes its socket.
func killTmuxServer(t *testing.T, srv tmux.Server) {
	t.Helper()
	out, _ := exec.Command("tmux", "-L", srv.Socket, "display-message", "-p", "#{socket_path}").Output()
	exec.Command("tmux", "-L", srv.Socket, "kill-server").Run()
	if path := strings.TrimSpace(string(out)); path != "" {
		os.Remove(path)
	}
}

// tmuxDB opens a database in a directory of its own. Its cleanup first
// waits for the tmux-pipe helpers writing to it to exit, which they do once
// their job has ended and its session is gone.
func tmuxDB(t *testing.T) *db.DB {
	t.Helper()
	dir, err := os.MkdirTemp("", "jobs-tmux-test-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "jobs.db")
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(tmuxPatience)
		for len(helpersOf(path)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if pids := helpersOf(path); len(pids) > 0 {
			t.Errorf("tmux-pipe helpers %v still run after the test", pids)
		}
		d.Close()
		os.RemoveAll(dir)
	})
	return d
}

// helpersOf lists the tmux-pipe helpers of the database at path, from
// /proc.
func helpersOf(path string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if slices.Contains(argv, "tmux-pipe") && slices.Contains(argv, path) {
			if info, err := proc.Inspect(pid); err == nil && !info.Dead() {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// startTmux starts a tmux job running the shell command cmd.
func startTmuxJob(t *testing.T, s *supervisor.Supervisor, req protocol.StartRequest) db.Job {
	t.Helper()
	req.Job.Mode = "tmux"
	job := supervisor.StartJob(t, s, req)
	if job.Status != vocab.StatusRunning {
		t.Fatalf("tmux job is %s (%s), want running", job.Status, job.Reason)
	}
	return job
}

// waitScreen waits until the job's screen satisfies ok and returns it.
func waitScreen(t *testing.T, job db.Job, what string, ok func(screen string) bool) string {
	t.Helper()
	var screen string
	var err error
	deadline := time.Now().Add(tmuxPatience)
	for {
		screen, err = tmuxjob.Capture(job, 0)
		if err == nil && ok(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s on the screen of job %s; last saw (err %v):\n%s", what, job.ID, err, screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasLine(screen, line string) bool {
	return slices.Contains(strings.Split(screen, "\n"), line)
}

// pty returns the job's stored terminal output.
func pty(t *testing.T, d *db.DB, id string) string {
	t.Helper()
	return string(supervisor.Output(t, d, id, logs.PTY))
}

// waitPTY waits until the job's stored output contains want.
func waitPTY(t *testing.T, d *db.DB, id, want string) string {
	t.Helper()
	var out string
	supervisor.Eventually(t, tmuxPatience, fmt.Sprintf("stored output %q", want), func() bool {
		out = pty(t, d, id)
		return strings.Contains(out, want)
	})
	return out
}

func sessionExists(t *testing.T, srv tmux.Server, name string) bool {
	t.Helper()
	ok, err := srv.HasSession(name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestTmux(t *testing.T) {
	srv := tmuxEnvTest(t)
	d := tmuxDB(t)
	s := supervisor.StartSupervisor(t, supervisor.Config{DB: d})
	ctx := context.Background()

	t.Run("REPL", func(t *testing.T) {
		t.Parallel()
		job := startTmuxJob(t, s, protocol.StartRequest{
			Job: db.NewJob{Argv: []string{"sh", "-i"}},
			Env: []string{"PS1=sh> ", "ENV="},
		})
		if job.TmuxSession != "jobs-"+job.ID {
			t.Errorf("session %q, want jobs-%s", job.TmuxSession, job.ID)
		}
		waitScreen(t, job, "the prompt", func(sc string) bool { return strings.HasPrefix(sc, "sh>") })
		if err := s.SendKeys(ctx, job.ID, []string{`echo "answer $((6*7)) $TERM $JOBS_ID"`}, true); err != nil {
			t.Fatal(err)
		}
		if err := s.SendKeys(ctx, job.ID, []string{"Enter"}, false); err != nil {
			t.Fatal(err)
		}
		screen := waitScreen(t, job, "the answer", func(sc string) bool { return strings.Contains(sc, "\nanswer 42 ") })
		// tmux's own terminal, not the dumb one pipe jobs get.
		if strings.Contains(screen, "answer 42 dumb") || !strings.Contains(screen, " "+job.ID+"\n") {
			t.Errorf("TERM or JOBS_ID wrong in the pane:\n%s", screen)
		}
		waitPTY(t, d, job.ID, "answer 42")

		// write types the data; eof is C-d, which ends the shell.
		if _, err := s.Write(ctx, job.ID, []byte("echo typed-$((1+1))\n"), false, 0); err != nil {
			t.Fatal(err)
		}
		waitScreen(t, job, "the typed line's output", func(sc string) bool { return hasLine(sc, "typed-2") })
		if _, err := s.Write(ctx, job.ID, nil, true, 0); err != nil {
			t.Fatal(err)
		}
		done := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
		if done.Status != vocab.StatusDone || supervisor.ExitCode(done) != 0 {
			t.Errorf("after C-d: %s exit %d (%s), want done 0", done.Status, supervisor.ExitCode(done), done.Reason)
		}
		if out := pty(t, d, job.ID); !strings.Contains(out, "typed-2") {
			t.Errorf("stored output lacks typed-2:\n%q", out)
		}
		supervisor.Eventually(t, 5*time.Second, "the session to close", func() bool { return !sessionExists(t, srv, job.TmuxSession) })
	})

	t.Run("Python", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("no python3")
		}
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Argv: []string{"python3", "-q"}}})
		waitScreen(t, job, "the >>> prompt", func(sc string) bool { return strings.Contains(sc, ">>>") })
		// As tmux does: text that is no key name is typed, key names
		// are pressed, in one call.
		if err := tmuxjob.SendKeys(job, []string{"print(sum(range(10)) * 1000)", "Enter"}, false); err != nil {
			t.Fatal(err)
		}
		waitScreen(t, job, "45000", func(sc string) bool { return hasLine(sc, "45000") })
		if err := tmuxjob.SendKeys(job, []string{"", "Enter"}, false); !errors.Is(err, vocab.ErrInvalid) {
			t.Errorf("an empty key: %v, want vocab.ErrInvalid", err)
		}
		if err := tmuxjob.SendKeys(job, []string{"print(sum(range(10)) * 1000)"}, true); err != nil {
			t.Fatal(err)
		}
		if err := tmuxjob.SendKeys(job, []string{"Enter"}, false); err != nil {
			t.Fatal(err)
		}
		waitScreen(t, job, "45000 twice", func(sc string) bool { return strings.Count(sc, "45000") >= 2 })
		if err := tmuxjob.SendKeys(job, []string{"C-d"}, false); err != nil {
			t.Fatal(err)
		}
		if done := supervisor.WaitDone(t, d, job.ID, tmuxPatience); done.Status != vocab.StatusDone {
			t.Errorf("python after C-d: %s (%s)", done.Status, done.Reason)
		}
	})

	t.Run("Redraw", func(t *testing.T) {
		t.Parallel()
		// A curses-style program: clears the screen, moves the cursor
		// and rewrites the same spot, as a progress display does.
		cmd := `for i in 1 2 3 4 5; do printf '\033[H\033[2Jframe %s\n' $i; printf '\033[3;5H[%s/5]' $i; sleep 0.02; done; ` +
			`printf '\033[10;1Hready\n'; read x`
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: cmd}})
		screen := waitScreen(t, job, "the last frame", func(sc string) bool { return hasLine(sc, "ready") })
		lines := strings.Split(screen, "\n")
		if lines[0] != "frame 5" || lines[2] != "    [5/5]" || strings.Contains(screen, "frame 4") {
			t.Errorf("screen is not the last frame:\n%s", screen)
		}
		// The chunk store has the raw terminal output, escapes and all.
		out := waitPTY(t, d, job.ID, "ready")
		if !strings.Contains(out, "\x1b[2J") || !strings.Contains(out, "frame 1") {
			t.Errorf("stored output is not the raw stream:\n%q", out)
		}
		if _, err := s.Write(ctx, job.ID, []byte("\n"), false, 0); err != nil {
			t.Fatal(err)
		}
		supervisor.WaitDone(t, d, job.ID, tmuxPatience)
	})

	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		// The commands that print wait for a key before they exit: what a
		// pane's process writes just before it exits can be lost when the
		// machine is busy (tmux closes the pane once the process is gone
		// and the terminal reports nothing unread, which the kernel can
		// report before the last bytes are through).
		ctx := context.Background()
		for _, tc := range []struct {
			cmd    string
			status vocab.Status
			code   int
			out    string
		}{
			{"exit 7", vocab.StatusFailed, 7, ""},
			{"echo hello-tmux; read x", vocab.StatusDone, 0, "hello-tmux"},
			{"kill -TERM $$", vocab.StatusFailed, 128 + int(syscall.SIGTERM), ""},
			{"printf 'no newline at the end'; read x; exit 3", vocab.StatusFailed, 3, "no newline at the end"},
		} {
			job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: tc.cmd}})
			if tc.out != "" {
				supervisor.Eventually(t, tmuxPatience, "the output of "+tc.cmd, func() bool { return strings.Contains(pty(t, d, job.ID), tc.out) })
				if err := s.SendKeys(ctx, job.ID, []string{"Enter"}, false); err != nil {
					t.Fatal(err)
				}
			}
			done := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
			if done.Status != tc.status || supervisor.ExitCode(done) != tc.code {
				t.Errorf("%q: %s exit %d (%s), want %s %d", tc.cmd, done.Status, supervisor.ExitCode(done), done.Reason, tc.status, tc.code)
			}
			if out := pty(t, d, job.ID); !strings.Contains(out, tc.out) {
				t.Errorf("%q: stored output %q lacks %q", tc.cmd, out, tc.out)
			}
			if done.UserCPU != 0 || done.MaxRSSKB != 0 {
				t.Errorf("%q: resource usage recorded for a tmux job", tc.cmd)
			}
			supervisor.Eventually(t, 5*time.Second, "the session of "+tc.cmd+" to close", func() bool {
				return !sessionExists(t, srv, job.TmuxSession)
			})
		}
	})

	t.Run("KeepTmux", func(t *testing.T) {
		t.Parallel()
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: "echo kept-screen; read x; exit 2"}, KeepTmux: true})
		supervisor.Eventually(t, tmuxPatience, "the job's output", func() bool { return strings.Contains(pty(t, d, job.ID), "kept-screen") })
		if err := s.SendKeys(context.Background(), job.ID, []string{"Enter"}, false); err != nil {
			t.Fatal(err)
		}
		done := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
		if done.Status != vocab.StatusFailed || supervisor.ExitCode(done) != 2 {
			t.Errorf("kept job: %s exit %d, want failed 2", done.Status, supervisor.ExitCode(done))
		}
		if !sessionExists(t, srv, job.TmuxSession) {
			t.Fatal("the kept session was closed")
		}
		// A person (or agent) can still read what the job left. (tmux's
		// "Pane is dead" line scrolled the first line into the history.)
		if screen, err := tmuxjob.Capture(done, 5); err != nil || !hasLine(screen, "kept-screen") {
			t.Errorf("capture of the kept session: %v\n%s", err, screen)
		}
		if err := tmuxjob.SendKeys(done, []string{"Enter"}, false); !errors.Is(err, vocab.ErrNotRunning) {
			t.Errorf("send keys to a finished job: %v, want vocab.ErrNotRunning", err)
		}
		if err := srv.KillSession(job.TmuxSession); err != nil {
			t.Fatal(err)
		}
		if _, err := tmuxjob.Capture(done, 0); !errors.Is(err, vocab.ErrNotRunning) || !strings.Contains(err.Error(), "--keep-tmux") {
			t.Errorf("capture of a finished job without session: %v", err)
		}
	})

	t.Run("KillTree", func(t *testing.T) {
		t.Parallel()
		// One child stays in the pane's group, one leaves it with setsid:
		// only its JOBS_ID tag ties it to the job.
		cmd := `sleep 300 & echo "pid $!"; setsid sleep 301 & echo "pid $!"; echo started; wait`
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: cmd}})
		out := waitPTY(t, d, job.ID, "started")
		var pids []int
		for _, f := range strings.Fields(out) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		if len(pids) != 2 {
			t.Fatalf("want 2 pids in %q", out)
		}
		// setsid may fork; the tag finds the sleep wherever it is.
		var starts []int64
		for _, pid := range append(pids, job.PID) {
			st, _ := proc.StartTime(pid)
			starts = append(starts, st)
		}
		res, err := s.Kill(ctx, job.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != vocab.StatusKilled || len(res.Survivors) != 0 || res.AlreadyDone {
			t.Errorf("kill result %+v, want killed with no survivors", res)
		}
		for i, pid := range append(pids, job.PID) {
			if starts[i] != 0 && proc.Alive(pid, starts[i]) {
				t.Errorf("pid %d survived the kill", pid)
			}
		}
		if found, _ := proc.FindByEnv(protocol.EnvJobID, job.ID); len(found) != 0 {
			t.Errorf("tagged processes left: %+v", found)
		}
		final, _ := d.FindJobByID(ctx, job.ID)
		if final.Status != vocab.StatusKilled || final.Reason != "killed" {
			t.Errorf("job %s (%s), want killed", final.Status, final.Reason)
		}
		supervisor.Eventually(t, 5*time.Second, "the session to close", func() bool { return !sessionExists(t, srv, job.TmuxSession) })
		// Killing it again is not an error.
		if res, err := s.Kill(ctx, job.ID, 0); err != nil || !res.AlreadyDone {
			t.Errorf("second kill: %+v, %v", res, err)
		}
	})

	t.Run("Signal", func(t *testing.T) {
		t.Parallel()
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: `trap 'echo got-usr1' USR1; echo armed; while :; do sleep 0.05; done`}})
		waitPTY(t, d, job.ID, "armed")
		if pids, err := s.Signal(ctx, job.ID, "USR1"); err != nil || len(pids) == 0 {
			t.Fatalf("signal: %v %v", pids, err)
		}
		waitPTY(t, d, job.ID, "got-usr1")
		if _, err := s.Kill(ctx, job.ID, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Signal(ctx, job.ID, "USR1"); !errors.Is(err, vocab.ErrNotRunning) {
			t.Errorf("signal a finished tmux job: %v, want vocab.ErrNotRunning", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		// The timeout leaves the pane's command the time to print on a
		// loaded machine: 500 ms, in a run of the test command beside
		// stress-ng, once ran out before it had printed (the pane starts
		// with jobs tmux-exec, a Go program, then the shell).
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: "echo waiting; sleep 300", Timeout: 3 * time.Second}})
		done := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
		if done.Status != vocab.StatusTimedOut || !strings.HasPrefix(done.Reason, "timed out after") {
			t.Errorf("job %s (%s), want timed_out", done.Status, done.Reason)
		}
		if !strings.Contains(pty(t, d, job.ID), "waiting") {
			t.Error("output of a timed-out job lost")
		}
	})

	// A start's TimeoutGrace holds between the timeout's SIGTERM and its
	// SIGKILL (the duragent profile's 5 s), and TmuxPrefix names the
	// session.
	t.Run("TimeoutGraceAndPrefix", func(t *testing.T) {
		t.Parallel()
		// The timeout leaves the shell the time to set its trap on a
		// loaded machine; "waiting" in the output says it did.
		const timeout, grace = 3 * time.Second, 1500 * time.Millisecond
		job := startTmuxJob(t, s, protocol.StartRequest{
			Job:          db.NewJob{Command: `trap "echo got TERM" TERM; echo waiting; while :; do sleep 0.1; done`, Timeout: timeout},
			TimeoutGrace: grace,
			TmuxPrefix:   "duragent-",
		})
		if got, want := job.TmuxSession, "duragent-"+job.ID; got != want {
			t.Errorf("session %q, want %q", got, want)
		}
		done := supervisor.WaitDone(t, d, job.ID, 60*time.Second)
		if done.Status != vocab.StatusTimedOut {
			t.Errorf("job %s (%s), want timed_out", done.Status, done.Reason)
		}
		if out := pty(t, d, job.ID); !strings.Contains(out, "waiting") || !strings.Contains(out, "got TERM") {
			t.Errorf("no SIGTERM caught before the SIGKILL: %q", out)
		}
		if lived := done.EndedAt.Sub(*done.StartedAt); lived < timeout+grace-100*time.Millisecond {
			t.Errorf("ended %s after it started, before its timeout and grace (%s + %s) were through", lived, timeout, grace)
		}
	})

	t.Run("SessionKilledByHand", func(t *testing.T) {
		t.Parallel()
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: "echo before-the-end; sleep 300"}})
		waitPTY(t, d, job.ID, "before-the-end")
		if err := srv.KillSession(job.TmuxSession); err != nil {
			t.Fatal(err)
		}
		lost := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
		if lost.Status != vocab.StatusLost || !strings.Contains(lost.Reason, job.TmuxSession) {
			t.Errorf("job %s (%s), want lost naming the session", lost.Status, lost.Reason)
		}
		if out := pty(t, d, job.ID); !strings.Contains(out, "before-the-end") {
			t.Errorf("output so far lost: %q", out)
		}
		if _, err := tmuxjob.Capture(lost, 0); !errors.Is(err, vocab.ErrNotRunning) {
			t.Errorf("capture: %v, want vocab.ErrNotRunning", err)
		}
		if err := s.SendKeys(ctx, job.ID, []string{"Enter"}, false); !errors.Is(err, vocab.ErrNotRunning) {
			t.Errorf("send keys: %v, want vocab.ErrNotRunning", err)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		pipe := supervisor.StartJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
		defer s.Kill(ctx, pipe.ID, 0)
		if err := s.SendKeys(ctx, pipe.ID, []string{"Enter"}, false); !errors.Is(err, vocab.ErrNotTmux) {
			t.Errorf("send keys to a pipe job: %v, want vocab.ErrNotTmux", err)
		}
		if _, err := tmuxjob.Capture(pipe, 0); !errors.Is(err, vocab.ErrNotTmux) {
			t.Errorf("capture a pipe job: %v, want vocab.ErrNotTmux", err)
		}
		if argv := tmuxjob.AttachArgv(pipe); argv != nil {
			t.Errorf("attach argv of a pipe job: %q", argv)
		}
		if err := s.SendKeys(ctx, "nosuchjob", []string{"Enter"}, false); !errors.Is(err, vocab.ErrNotFound) {
			t.Errorf("send keys to a missing job: %v, want ErrNotFound", err)
		}
		// A job whose command does not exist fails to start, clearly.
		job, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Argv: []string{"no-such-command-xyz"}, Mode: "tmux"}})
		if err != nil || job.Status != vocab.StatusFailed || !strings.Contains(job.Reason, "command not found") {
			t.Errorf("start of a missing command: %s (%s), %v", job.Status, job.Reason, err)
		}
		job, err = s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "true", Cwd: "/no/such/dir", Mode: "tmux"}})
		if err != nil || job.Status != vocab.StatusFailed || !strings.Contains(job.Reason, "/no/such/dir") {
			t.Errorf("start in a missing cwd: %s (%s), %v", job.Status, job.Reason, err)
		}
	})

	t.Run("Attach", func(t *testing.T) {
		t.Parallel()
		job := startTmuxJob(t, s, protocol.StartRequest{Job: db.NewJob{Command: "echo watch-me-live; read x"}})
		waitScreen(t, job, "the marker", func(sc string) bool { return hasLine(sc, "watch-me-live") })
		// A person's terminal: a session on another server runs the
		// attach command, as `jobs attach` would from inside tmux.
		outer := tmux.Server{Socket: srv.Socket + "-outer"}
		t.Cleanup(func() { killTmuxServer(t, outer) })
		argv := append([]string{"env", "-u", "TMUX"}, tmuxjob.AttachArgv(job)...)
		if err := outer.NewSession(ctx, "person", "/", nil, argv, 100, 30); err != nil {
			t.Fatal(err)
		}
		waitOuter := func(what string, ok func(string) bool) {
			t.Helper()
			supervisor.Eventually(t, tmuxPatience, what, func() bool {
				sc, err := outer.Capture("person", 0)
				return err == nil && ok(sc)
			})
		}
		waitOuter("the job's screen in the attached terminal", func(sc string) bool { return strings.Contains(sc, "watch-me-live") })
		// What the person types reaches the job.
		if err := outer.SendLiteral("person", "from-the-person\n"); err != nil {
			t.Fatal(err)
		}
		done := supervisor.WaitDone(t, d, job.ID, tmuxPatience)
		if done.Status != vocab.StatusDone {
			t.Errorf("job %s (%s) after the person typed, want done", done.Status, done.Reason)
		}
		if out := pty(t, d, job.ID); !strings.Contains(out, "from-the-person") {
			t.Errorf("the person's typing is not in the output: %q", out)
		}
	})
}

// TestTmuxSupervisorKilled kills -9 the supervisor that started a tmux
// job: the job keeps running and being captured, is not swept lost, can
// still be driven, and its end is recorded by its helper.
func TestTmuxSupervisorKilled(t *testing.T) {
	srv := tmuxEnvTest(t)
	d := tmuxDB(t)
	ctx := context.Background()
	rt := supervisor.NewRuntimeDir(t)

	cmd := exec.Command(supervisor.Exe(t), "tmux-supervisor", d.Path, rt,
		`echo first-half; read answer; echo "second-half $answer"; read x; exit 3`)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read supervisor's ids: %v", err)
	}
	var supID, jobID string
	if _, err := fmt.Sscan(line, &supID, &jobID); err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	waitPTY(t, d, jobID, "first-half")

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The job lives on in tmux: no sweep may call it lost, and a new
	// supervisor adopts nothing but leaves it be.
	if n, err := sweep.Lost(ctx, d, nil); err != nil || n != 0 {
		t.Errorf("sweep.Lost = %d, %v; want 0 jobs marked", n, err)
	}
	s2 := supervisor.StartSupervisor(t, supervisor.Config{DB: d})
	job, err := d.FindJobByID(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != vocab.StatusRunning {
		t.Fatalf("job %s (%s) after its supervisor died, want running", job.Status, job.Reason)
	}
	supervisor.Eventually(t, tmuxPatience, "the dead supervisor recorded ended", func() bool {
		sup, err := d.FindSupervisor(ctx, supID)
		return err == nil && sup.EndedAt != nil
	})

	// Driven through another supervisor, or none at all.
	if err := s2.SendKeys(ctx, jobID, []string{"forty-two"}, true); err != nil {
		t.Fatal(err)
	}
	if err := tmuxjob.SendKeys(job, []string{"Enter"}, false); err != nil {
		t.Fatal(err)
	}
	// (It waits for a key once more before it exits: see ExitCodes.)
	waitPTY(t, d, jobID, "second-half forty-two")
	if err := tmuxjob.SendKeys(job, []string{"Enter"}, false); err != nil {
		t.Fatal(err)
	}
	done := supervisor.WaitDone(t, d, jobID, tmuxPatience)
	if done.Status != vocab.StatusFailed || supervisor.ExitCode(done) != 3 {
		t.Errorf("job %s exit %d (%s), want failed 3", done.Status, supervisor.ExitCode(done), done.Reason)
	}
	out := pty(t, d, jobID)
	if !strings.Contains(out, "first-half") || !strings.Contains(out, "second-half forty-two") {
		t.Errorf("output incomplete: %q", out)
	}
	supervisor.Eventually(t, 5*time.Second, "the session to close", func() bool { return !sessionExists(t, srv, job.TmuxSession) })

	// A helper closes the session of a job that ended (the last of its
	// output comes with the pipe's close) before it records the end: in
	// between, on a busy machine for seconds, the session is gone and
	// the helper lives. A sweep then must leave the job to the helper (it
	// marked such a job lost, and the helper's "done" came too late).
	ending, err := d.CreateJob(ctx, db.NewJob{Scope: "default", Command: "x", Argv: []string{"x"}, Cwd: "/", Mode: "tmux",
		TmuxSession: "jobs-closedbyitshelper", SupervisorID: supID}, db.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command("/bin/sh", "-c", "sleep 600; :", "tmux-pipe", "--db", d.Path, "--job", ending.ID)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	if n, err := sweep.Lost(ctx, d, nil); err != nil || n != 0 {
		t.Errorf("sweep.Lost of a tmux job whose helper lives = %d, %v; want 0", n, err)
	}
	if j, _ := d.FindJobByID(ctx, ending.ID); j.Status.Terminal() {
		t.Errorf("tmux job whose helper lives is %s (%s), want it left to its helper", j.Status, j.Reason)
	}
	helper.Process.Kill()
	helper.Wait()

	// With the session and the helper gone and the job not finished, a
	// sweep marks it lost: simulate a job whose helper and session both
	// vanished.
	lostJob, err := d.CreateJob(ctx, db.NewJob{Scope: "default", Command: "x", Argv: []string{"x"}, Cwd: "/", Mode: "tmux",
		TmuxSession: "jobs-nosuchsession", SupervisorID: supID}, db.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sweep.Lost(ctx, d, nil); err != nil || n != 2 {
		t.Errorf("sweep.Lost of two tmux jobs without session or helper = %d, %v; want 2", n, err)
	}
	for _, id := range []string{ending.ID, lostJob.ID} {
		if j, _ := d.FindJobByID(ctx, id); j.Status != vocab.StatusLost {
			t.Errorf("tmux job %s without session or helper is %s, want lost", id, j.Status)
		}
	}
}

// TestTmuxNotInstalled: without tmux, a tmux start says so and creates no
// job; pipe jobs still work.
func TestTmuxNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	d := tmuxDB(t)
	s := supervisor.StartSupervisor(t, supervisor.Config{DB: d})
	ctx := context.Background()
	_, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "true", Mode: "tmux"}})
	if !errors.Is(err, vocab.ErrNoTmux) || !strings.Contains(err.Error(), "tmux is not installed") {
		t.Fatalf("start without tmux: %v, want vocab.ErrNoTmux saying tmux is not installed", err)
	}
	if jobs, _ := d.FindJobs(ctx, db.Filter{AllScopes: true}); len(jobs) != 0 {
		t.Errorf("a failed tmux start created %d jobs", len(jobs))
	}
	job := supervisor.StartJob(t, s, protocol.StartRequest{Job: db.NewJob{Argv: []string{"/bin/sh", "-c", "echo still-fine"}}})
	if done := supervisor.WaitDone(t, d, job.ID, tmuxPatience); done.Status != vocab.StatusDone {
		t.Errorf("pipe job without tmux: %s (%s)", done.Status, done.Reason)
	}
}
