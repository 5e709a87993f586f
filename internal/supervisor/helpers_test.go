package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/internal/vocab"
)

// The test binary doubles as the helper processes the tests start, as
// os/exec's tests do: `<test binary> helper NAME ARGS…` runs a helper and
// `<test binary> supervise --db PATH` is the detached supervisor that
// EnsureDefault starts.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "helper":
			os.Exit(helper(os.Args[2:]))
		case "supervise":
			os.Exit(superviseMain(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

func helper(args []string) int {
	switch args[0] {
	case "exit":
		n, _ := strconv.Atoi(args[1])
		return n
	case "sleep":
		time.Sleep(time.Hour)
	case "spew":
		n, _ := strconv.Atoi(args[1])
		seed, _ := strconv.ParseUint(args[2], 10, 64)
		out, errOut := pattern(n, seed), pattern(n, seed+1)
		// Interleave uneven writes to both streams.
		r := rand.New(rand.NewPCG(seed, 7))
		for len(out) > 0 || len(errOut) > 0 {
			k := min(len(out), r.IntN(9000))
			os.Stdout.Write(out[:k])
			out = out[k:]
			k = min(len(errOut), r.IntN(9000))
			os.Stderr.Write(errOut[:k])
			errOut = errOut[k:]
		}
	case "ignore-sigterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "fork-grandchild":
		exe, _ := os.Executable()
		a := exec.Command(exe, "helper", "sleep")
		b := exec.Command(exe, "helper", "sleep")
		// b leaves the job's process group and session: only its
		// JOBS_ID tag ties it to the job.
		b.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := errors.Join(a.Start(), b.Start()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("pids %d %d\n", a.Process.Pid, b.Process.Pid)
		time.Sleep(time.Hour)
	case "read-stdin":
		io.Copy(os.Stdout, os.Stdin)
		fmt.Println("eof")
	case "dump-env":
		env := map[string]string{}
		for _, e := range os.Environ() {
			if k, v, _ := strings.Cut(e, "="); strings.HasPrefix(k, "JOBS_") {
				env[k] = v
			}
		}
		b, _ := json.Marshal(env)
		tmp := args[1] + ".tmp"
		os.WriteFile(tmp, b, 0o600)
		os.Rename(tmp, args[1])
		if len(args) > 2 {
			n, _ := strconv.Atoi(args[2])
			return n
		}
	case "supervisor":
		// A supervisor in its own process, to be SIGKILLed by a test:
		// it starts one job and reports "<supervisor id> <job id>".
		ctx := context.Background()
		d, err := db.Open(ctx, args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s, err := New(Config{DB: d, RuntimeDir: args[2]})
		if err == nil {
			err = s.Open(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		exe, _ := os.Executable()
		job, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Argv: []string{exe, "helper", "sleep"}}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%s %s\n", s.ID(), job.ID)
		time.Sleep(time.Hour)
	case "threads":
		return threadsMain(args[1:])
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", args[0])
		return 2
	}
	return 0
}

// threadsMain runs a supervisor in a fresh process, starts one sleeping
// job and then n more, and reports "<threads with one job> <threads with
// n+1>" once every job's waiter is in place (see TestJobsHoldNoThreads).
func threadsMain(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(args[0])
	dir, err := os.MkdirTemp("", "jt")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	s, err := New(Config{DB: d, RuntimeDir: filepath.Join(dir, "run"), Logf: func(string, ...any) {}, Grace: 100 * time.Millisecond})
	if err == nil {
		err = s.Open(ctx)
	}
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	exe, _ := os.Executable()
	req := protocol.StartRequest{Job: db.NewJob{Argv: []string{exe, "helper", "sleep"}, Stdin: "null"}}
	started := 0
	startN := func(k int) error {
		for range k {
			if _, err := s.Start(ctx, req); err != nil {
				return err
			}
			started++
		}
		// Every job's waiter has reached its wait once as many goroutines
		// sit in one as there are jobs.
		deadline := time.Now().Add(testwait.Least)
		for waiters() < started {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d waiters in place", waiters(), started)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	if err := startN(1); err != nil {
		return fail(err)
	}
	before := procThreads()
	if err := startN(n); err != nil {
		return fail(err)
	}
	fmt.Println(before, procThreads())
	return 0
}

// waiters counts the goroutines waiting for a job's main process to exit:
// in awaitExit, or in os.Process.Wait.
func waiters() int {
	buf := make([]byte, 1<<22)
	st := string(buf[:runtime.Stack(buf, true)])
	return strings.Count(st, "supervisor.awaitExit(") + strings.Count(st, "os.(*Process).pidfdWait(") +
		strings.Count(st, "os.(*Process).blockUntilWaitable(")
}

// procThreads is the number of OS threads of this process.
func procThreads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// superviseMain is the CLI's `jobs supervise` in miniature.
func superviseMain(args []string) int {
	var dbPath, runtimeDir string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--db":
			dbPath = args[i+1]
		case "--runtime-dir":
			runtimeDir = args[i+1]
		}
	}
	// Idle for ten minutes, far beyond any test, it exits: a supervisor
	// a failed test left behind does not live on beside later runs.
	err := Supervise(context.Background(), dbPath, Config{RuntimeDir: runtimeDir, IdleExit: 10 * time.Minute})
	if errors.Is(err, vocab.ErrDefaultRunning) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// pattern returns n reproducible random bytes (binary, invalid UTF-8 and
// all).
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// testExe is the test binary, for helper argv.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func helperArgv(t *testing.T, args ...string) []string {
	return append([]string{testExe(t), "helper"}, args...)
}

// openDB opens a fresh database in a temporary directory.
func openDB(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// runtimeDir returns a short private directory for sockets (a unix socket
// path must stay under ~100 bytes, and test temp paths can be long).
func runtimeDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run")
}

// startSupervisor opens a supervisor on d with test-friendly timings and
// closes it at cleanup.
func startSupervisor(t testing.TB, cfg Config) *Supervisor {
	t.Helper()
	if cfg.DB == nil {
		cfg.DB = openDB(t)
	}
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = runtimeDir(t)
	}
	if cfg.Grace == 0 {
		cfg.Grace = 300 * time.Millisecond
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 500 * time.Millisecond
	}
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close supervisor: %v", err)
		}
	})
	return s
}

func start(t *testing.T, s *Supervisor, req protocol.StartRequest) db.Job {
	t.Helper()
	job, err := s.Start(context.Background(), req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return job
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// waitDone waits until the job has a terminal status and returns it.
func waitDone(t *testing.T, d *db.DB, id string, within time.Duration) db.Job {
	t.Helper()
	var job db.Job
	eventually(t, within, "job "+id+" to finish", func() bool {
		var err error
		job, err = d.FindJobByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return job.Status.Terminal()
	})
	return job
}

// output returns the job's stored output of one stream ("" for both).
func output(t *testing.T, d *db.DB, id string, stream logs.Stream) []byte {
	t.Helper()
	p, err := logs.ReadRange(context.Background(), d, id, 0, logs.MaxLimit, logs.Filter{Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}

// waitOutput waits until the job's output contains want and returns it.
func waitOutput(t *testing.T, s *Supervisor, id, want string) string {
	t.Helper()
	var out string
	eventually(t, 10*time.Second, fmt.Sprintf("output %q", want), func() bool {
		s.Flush(context.Background())
		out = string(output(t, s.db, id, ""))
		return strings.Contains(out, want)
	})
	return out
}

func exitCode(j db.Job) int {
	if j.ExitCode == nil {
		return -1
	}
	return *j.ExitCode
}

func fmtSscanf(s, format string, args ...any) (int, error) { return fmt.Sscanf(s, format, args...) }
