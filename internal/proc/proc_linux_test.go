package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in   string
		want Info
	}{
		{"42 (sleep) S 1 42 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0",
			Info{PID: 42, PPID: 1, PGID: 42, SID: 7, State: 'S', StartTime: 12345, Comm: "sleep"}},
		{"7 (a) (b) c) Z 3 4 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0\n",
			Info{PID: 7, PPID: 3, PGID: 4, SID: 5, State: 'Z', StartTime: 99, Comm: "a) (b) c"}},
		{"8 (with space ) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0",
			Info{PID: 8, PPID: 1, PGID: 1, SID: 1, State: 'R', StartTime: 1, Comm: "with space "}},
		// PF_EXITING (0x4) in the flags: running, yet already dead.
		{"9 (dying) R 1 9 9 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0",
			Info{PID: 9, PPID: 1, PGID: 9, SID: 9, State: 'R', StartTime: 77, Comm: "dying", Exiting: true}},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.in))
		if err != nil {
			t.Errorf("parseStat(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parseStat(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if dead := tt.want.State == 'Z' || tt.want.Exiting; got.Dead() != dead {
			t.Errorf("parseStat(%q).Dead() = %v, want %v", tt.in, got.Dead(), dead)
		}
	}
	for _, bad := range []string{"", "42 sleep S 1", "42 (sleep) S 1 2", "x (a) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) gave no error", bad)
		}
	}
}

func TestInspectSelf(t *testing.T) {
	info, err := Inspect(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.PPID, os.Getppid(); got != want {
		t.Errorf("PPID = %d, want %d", got, want)
	}
	if got, want := info.PGID, syscall.Getpgrp(); got != want {
		t.Errorf("PGID = %d, want %d", got, want)
	}
	if info.StartTime <= 0 {
		t.Errorf("StartTime = %d", info.StartTime)
	}
	if !Alive(os.Getpid(), info.StartTime) {
		t.Error("Alive(self) = false")
	}
	if _, err := Inspect(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Inspect(no such pid) = %v, want ErrNoProcess", err)
	}
}

func TestAliveGuardsPidReuse(t *testing.T) {
	j := startJob(t, helperCmd("sleep"))
	j.line(t)
	pid, start := j.target.PID, j.target.PIDStart
	if !Alive(pid, start) {
		t.Fatal("Alive with the right start time = false")
	}
	if Alive(pid, start+1) || Alive(pid, start-1) || Alive(pid, 0) {
		t.Error("Alive with a wrong start time = true")
	}
	// A signal aimed at the same pid with a wrong start time is not sent.
	if ok, err := signalProcess(pid, start+1, syscall.SIGKILL); ok || err != nil {
		t.Errorf("signalProcess with a wrong start time = %v, %v", ok, err)
	}
	wrong := j.target
	wrong.PIDStart++
	wrong.PGID, wrong.EnvKey = 0, ""
	if res, err := KillTree(context.Background(), wrong, 0); err != nil || len(res.Signalled) != 0 {
		t.Errorf("KillTree with a wrong start time = %+v, %v", res, err)
	}
	if !Alive(pid, start) {
		t.Error("the process died from a signal meant for another start time")
	}
}

func TestZombieCountsAsDead(t *testing.T) {
	cmd := helperCmd("exit", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	st, err := StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Unwaited, the exited child stays a zombie.
	eventually(t, patience, "the child to become a zombie", func() bool { return state(pid) == 'Z' })
	if Alive(pid, st) {
		t.Error("Alive(zombie) = true")
	}
	if n := CountAlive(Target{PID: pid, PIDStart: st}); n != 0 {
		t.Errorf("CountAlive(zombie) = %d", n)
	}
}

func TestKillTreeKillsEveryDescendant(t *testing.T) {
	j := startJob(t, helperCmd("tree"))
	procs := j.pids(t)
	procs[j.target.PID] = j.target.PIDStart
	if got, want := len(procs), 3; got != want {
		t.Fatalf("got %d processes, want %d", got, want)
	}
	// The setsid'd grandchild is found only by its tag.
	tagged, err := FindByEnv("JOBS_ID", j.target.EnvValue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tagged) != 3 {
		t.Errorf("FindByEnv found %d processes, want 3: %+v", len(tagged), tagged)
	}
	if n := CountAlive(j.target); n != 3 {
		t.Errorf("CountAlive = %d, want 3", n)
	}

	res, err := KillTree(context.Background(), j.target, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for pid, st := range procs {
		if Alive(pid, st) {
			t.Errorf("pid %d alive after KillTree", pid)
		}
		if !slices.Contains(res.Signalled, pid) {
			t.Errorf("pid %d not in Signalled %v", pid, res.Signalled)
		}
	}
	if res.Escalated || len(res.Survivors) != 0 {
		t.Errorf("KillTree = %+v, want no escalation and no survivor", res)
	}
	if n := CountAlive(j.target); n != 0 {
		t.Errorf("CountAlive after kill = %d", n)
	}
	// Nothing left: a second kill does nothing.
	again, err := KillTree(context.Background(), j.target, time.Second)
	if err != nil || len(again.Signalled) != 0 || again.Escalated {
		t.Errorf("second KillTree = %+v, %v; want nothing", again, err)
	}
}

func TestKillTreeEscalates(t *testing.T) {
	j := startJob(t, helperCmd("ignore-sigterm"))
	j.line(t)
	start := time.Now()
	res, err := KillTree(context.Background(), j.target, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Escalated {
		t.Error("Escalated = false for a SIGTERM-ignoring process")
	}
	if len(res.Survivors) != 0 {
		t.Errorf("Survivors = %v", res.Survivors)
	}
	if Alive(j.target.PID, j.target.PIDStart) {
		t.Error("process alive after KillTree")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("KillTree returned after %v, before the grace period", d)
	}
	if err := j.cmd.Wait(); err == nil || j.cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Wait = %v, want death by SIGKILL", err)
	}
}

func TestKillTreeStoppedProcess(t *testing.T) {
	j := startJob(t, helperCmd("stopped"))
	j.line(t)
	eventually(t, patience, "the helper to stop", func() bool { return state(j.target.PID) == 'T' })
	res, err := KillTree(context.Background(), j.target, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if Alive(j.target.PID, j.target.PIDStart) {
		t.Error("stopped process alive after KillTree")
	}
	// SIGCONT lets the stopped process act on SIGTERM within the grace.
	if res.Escalated {
		t.Error("a stopped process needed SIGKILL")
	}
}

func TestKillTreeContextCutsGrace(t *testing.T) {
	j := startJob(t, helperCmd("ignore-sigterm"))
	j.line(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := KillTree(ctx, j.target, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("KillTree took %v despite the cancelled context", d)
	}
	if !res.Escalated || Alive(j.target.PID, j.target.PIDStart) {
		t.Errorf("KillTree = %+v; want escalated and dead", res)
	}
}

func TestKillTreeNeverSignalsCaller(t *testing.T) {
	self := os.Getpid()
	st, err := StartTime(self)
	if err != nil {
		t.Fatal(err)
	}
	// If this were signalled, the test binary would die here.
	res, err := KillTree(context.Background(), Target{PGID: syscall.Getpgrp(), PID: self, PIDStart: st}, 0)
	if err != nil || len(res.Signalled) != 0 {
		t.Errorf("KillTree(own group) = %+v, %v; want nothing signalled", res, err)
	}

	j := startJob(t, helperCmd("sleep"))
	j.line(t)
	ex := j.target
	ex.Exclude = []int{j.target.PID}
	res, err = KillTree(context.Background(), ex, 0)
	if err != nil || len(res.Signalled) != 0 {
		t.Errorf("KillTree(excluded) = %+v, %v; want nothing signalled", res, err)
	}
	if !Alive(j.target.PID, j.target.PIDStart) {
		t.Error("excluded process killed")
	}
}

func TestSignalStopAndCont(t *testing.T) {
	j := startJob(t, helperCmd("fork-grandchild"))
	grand := j.pids(t)
	pids, err := Signal(j.target, syscall.SIGSTOP)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 2 {
		t.Errorf("Signal(STOP) signalled %v, want 2 pids", pids)
	}
	for pid := range grand {
		eventually(t, patience, "the grandchild to stop", func() bool { return state(pid) == 'T' })
	}
	eventually(t, patience, "the child to stop", func() bool { return state(j.target.PID) == 'T' })
	if n := CountAlive(j.target); n != 2 {
		t.Errorf("CountAlive(stopped) = %d, want 2", n)
	}
	if _, err := Signal(j.target, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, patience, "the child to resume", func() bool { return state(j.target.PID) != 'T' })
}

func TestUsageOf(t *testing.T) {
	cmd := helperCmd("exit", "0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	u := UsageOf(cmd.ProcessState)
	// A Go binary needs at least a megabyte; a figure in bytes would be
	// a thousand times more than any test machine has.
	if u.MaxRSSKB < 1024 || u.MaxRSSKB > 64<<20 {
		t.Errorf("MaxRSSKB = %d, not a plausible KiB figure", u.MaxRSSKB)
	}
	if u.UserCPU+u.SysCPU <= 0 {
		t.Errorf("CPU = %v + %v, want some", u.UserCPU, u.SysCPU)
	}
	if got := UsageOf(nil); got != (Usage{}) {
		t.Errorf("UsageOf(nil) = %+v", got)
	}
}

func TestPipeInode(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ri, err := PipeInode(r)
	if err != nil {
		t.Fatal(err)
	}
	wi, err := PipeInode(w)
	if err != nil {
		t.Fatal(err)
	}
	if ri != wi || ri == 0 {
		t.Errorf("PipeInode: read end %d, write end %d", ri, wi)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := PipeInode(f); err == nil {
		t.Error("PipeInode(/dev/null) gave no error")
	}
}

func TestFindByEnvExactEntry(t *testing.T) {
	j := startJob(t, helperCmd("sleep"))
	j.line(t)
	tag := j.target.EnvValue
	for _, v := range []string{tag[:len(tag)-1], tag + "x", ""} {
		found, err := FindByEnv("JOBS_ID", v)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range found {
			if info.PID == j.target.PID {
				t.Errorf("FindByEnv(JOBS_ID=%q) matched JOBS_ID=%q", v, tag)
			}
		}
	}
	if _, err := FindByEnv("", "x"); err == nil {
		t.Error("FindByEnv with an empty key gave no error")
	}
}

// BenchmarkCountAlive measures one full /proc pass with the environment
// scan, the cost of every KillTree poll and of each CountAlive.
func BenchmarkCountAlive(b *testing.B) {
	t := Target{PGID: 1 << 30, EnvKey: "JOBS_ID", EnvValue: "no-such-job"}
	for b.Loop() {
		CountAlive(t)
	}
}

// TestFindByArgs: a process is found by an argument and the arguments
// after it side by side, not by the same words apart or in another order.
func TestFindByArgs(t *testing.T) {
	id := fmt.Sprintf("job%d", os.Getpid())
	c := exec.Command("/bin/sh", "-c", "sleep 600; :", "tmux-pipe", "--db", "/x.db", "--job", id, "--grace", "1s")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	for _, tc := range []struct {
		first string
		rest  []string
		want  bool
	}{
		{"tmux-pipe", []string{"--job", id}, true},
		{"tmux-pipe", []string{"--db", "/x.db", "--job", id}, true},
		{"tmux-pipe", []string{"--job", id + "x"}, false},
		{"tmux-pipe", []string{id, "--job"}, false},
		{"--job", []string{"tmux-pipe"}, false}, // before first, not after
		{"tmux-pipes", []string{"--job", id}, false},
	} {
		found, err := FindByArgs(tc.first, tc.rest...)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(found, func(i Info) bool { return i.PID == c.Process.Pid })
		if got != tc.want {
			t.Errorf("FindByArgs(%q, %q) found the process: %v, want %v", tc.first, tc.rest, got, tc.want)
		}
	}
}

// TestKillTreeSparesTheJobsHook: a job's on_exit hook carries the job's
// tag (it sees JOBS_ID) and may start while a kill of the job still
// sweeps its processes; marked with NotEnvKey=<id> (JOBS_HOOK), it is not
// the job's: KillTree ends the job and leaves the hook running. Without
// the mark the same process is signalled as the job's.
func TestKillTreeSparesTheJobsHook(t *testing.T) {
	j := startJob(t, helperCmd("tree"))
	hook := func(marked bool) *exec.Cmd {
		cmd := helperCmd("sleep")
		cmd.Env = append(cmd.Env, "JOBS_ID="+j.target.EnvValue)
		if marked {
			cmd.Env = append(cmd.Env, "JOBS_HOOK="+j.target.EnvValue)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	marked, unmarked := hook(true), hook(false)
	target := j.target
	target.NotEnvKey = "JOBS_HOOK"
	res, err := KillTree(context.Background(), target, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(res.Signalled, marked.Process.Pid) {
		t.Errorf("KillTree signalled the job's hook (pid %d): %+v", marked.Process.Pid, res)
	}
	if !slices.Contains(res.Signalled, unmarked.Process.Pid) {
		t.Errorf("KillTree left a process with the job's tag and no hook mark (pid %d): %+v", unmarked.Process.Pid, res)
	}
	st, err := StartTime(marked.Process.Pid)
	if err != nil || !Alive(marked.Process.Pid, st) {
		t.Errorf("the hook is gone after the job's kill: %v", err)
	}
	if n := CountAlive(target); n != 0 {
		t.Errorf("CountAlive after the kill = %d, want 0 (the hook is not the job's)", n)
	}
}
