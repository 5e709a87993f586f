package proc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
)

// The test binary doubles as the helper processes, as os/exec's tests do:
// with helperEnv set, TestMain runs the named helper instead of the tests.
const helperEnv = "PROC_TEST_HELPER"

// helperLife bounds how long a helper lives if a test forgets it.
const helperLife = 60 * time.Second

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Unsetenv(helperEnv)
		runHelper(name, os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(name string, args []string) {
	switch name {
	case "sleep":
		fmt.Println("ready")
		time.Sleep(helperLife)
	case "ignore-sigterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(helperLife)
	case "fork-grandchild", "setsid-grandchild":
		// Prints the grandchild's pid, then sleeps; the grandchild sleeps
		// too. setsid-grandchild's grandchild leaves the process group
		// and session, keeping only the JOBS_ID tag.
		cmd := helperCmd("sleep")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: name == "setsid-grandchild"}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(helperLife)
	case "tree":
		// Both kinds of grandchild under one main process.
		same, away := helperCmd("sleep"), helperCmd("sleep")
		away.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		for _, c := range []*exec.Cmd{same, away} {
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		fmt.Println(same.Process.Pid, away.Process.Pid)
		time.Sleep(helperLife)
	case "read-stdin":
		fmt.Println("ready")
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Printf("got %q\n", line)
	case "stopped":
		fmt.Println("ready")
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(helperLife)
	case "spin":
		fmt.Println("ready")
		for end := time.Now().Add(helperLife); time.Now().Before(end); {
		}
	case "exit":
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	case "drain-stdin":
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	case "orphan":
		// Starts a grandchild that lives until stdin reaches EOF and
		// exits without waiting for it, so the grandchild is orphaned.
		cmd := helperCmd("drain-stdin")
		cmd.Stdin = os.Stdin
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
		os.Exit(2)
	}
}

// helperCmd returns a command that runs the named helper from the test
// binary, inheriting this process's environment (and so its JOBS_ID).
func helperCmd(name string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	return cmd
}

// job is a helper or command started like the supervisor starts a job: in
// its own process group with a JOBS_ID tag, and a stdin pipe.
type job struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stdout *os.File
	stdin  *os.File // write end of the job's stdin pipe
	inode  uint64   // the stdin pipe's inode
	target Target
}

func newTag(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startJob starts cmd as a job and arranges for every process of it to be
// killed and the main process waited for at the end of the test.
func startJob(t *testing.T, cmd *exec.Cmd) *job {
	t.Helper()
	return startJobWith(t, cmd, func(c *exec.Cmd) error { return c.Start() })
}

func startJobWith(t *testing.T, cmd *exec.Cmd, start func(*exec.Cmd) error) *job {
	t.Helper()
	tag := newTag(t)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "JOBS_ID="+tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := start(cmd); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	inode, err := PipeInode(inW)
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	j := &job{
		cmd: cmd, out: bufio.NewReader(outR), stdout: outR, stdin: inW, inode: inode,
		target: Target{PGID: pid, PID: pid, PIDStart: st, EnvKey: "JOBS_ID", EnvValue: tag},
	}
	t.Cleanup(func() {
		if _, err := KillTree(context.Background(), j.target, 0); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		inW.Close()
		outR.Close()
		cmd.Wait()
	})
	return j
}

// line reads one line of the job's stdout, failing the test after a while.
func (j *job) line(t *testing.T) string {
	t.Helper()
	j.stdout.SetReadDeadline(time.Now().Add(patience))
	s, err := j.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read helper output: %v (got %q)", err, s)
	}
	return strings.TrimSpace(s)
}

// pids reads a line of space-separated pids and returns each with its start
// time.
func (j *job) pids(t *testing.T) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for _, f := range strings.Fields(j.line(t)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("helper printed %q, want pids", f)
		}
		st, err := StartTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		out[pid] = st
	}
	return out
}

// eventually polls cond until it is true, failing the test at the deadline.
// patience bounds the tests' waits for a process to reach a state. It
// only bounds a failure, and must hold on a busy machine: beside
// stress-ng and the rest of the suite, python3 took 1.7 s to start
// (0.03 s idle), and a python3 blocked on input() was once not seen
// within 10 s.
const patience = 60 * time.Second

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

func state(pid int) byte {
	info, err := Inspect(pid)
	if err != nil {
		return 0
	}
	return info.State
}
