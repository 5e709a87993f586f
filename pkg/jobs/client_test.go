package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testbin"
	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// jobsBin is the jobs binary, built once for the tests that need a detached
// supervisor or the CLI.
var jobsBin string

func TestMain(m *testing.M) {
	if os.Getenv("JOBS_TEST_HELPER") == "detached-start" {
		detachedStartHelper()
		return
	}
	dir, err := os.MkdirTemp("", "jobs-pkg-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Runtime directories (sockets, locks) of every test live here.
	os.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	os.MkdirAll(filepath.Join(dir, "run"), 0o700)
	if jobsBin, err = testbin.Jobs(dir); err != nil {
		fmt.Fprintln(os.Stderr, "build jobs:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopSupervisors(dir)
	os.RemoveAll(dir)
	os.Exit(code)
}

// stopSupervisors ends detached supervisors the tests started.
func stopSupervisors(dir string) {
	out, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "jobs")+" supervise").Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		fmt.Sscan(f, &pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

func open(t *testing.T, o jobs.Options) *jobs.Client {
	t.Helper()
	if o.DB == "" {
		o.DB = filepath.Join(t.TempDir(), "jobs.db")
	}
	if o.Scope == "" {
		o.Scope = "test"
	}
	c, err := jobs.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond until it holds or the deadline passes.
// eventually waits for cond with a bound that only bounds a failure and
// must hold on a busy machine: beside stress-ng and the rest of the suite
// a killed job's on_exit hook was once not seen within 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, time.Minute, what, cond)
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestInProcessCloseEndsJobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "test"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Start(ctx, jobs.Spec{Command: "sleep 60 & sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(j.PID) {
		t.Errorf("pid %d still alive after Close", j.PID)
	}
	r := open(t, jobs.Options{DB: path, Scope: "test", Detached: true})
	got, err := r.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != jobs.StatusKilled || !strings.Contains(got.Reason, "closed") {
		t.Errorf("after Close: status %s reason %q, want killed with a reason", got.Status, got.Reason)
	}
	if got.Descendants != 0 {
		t.Errorf("descendants = %d, want 0", got.Descendants)
	}
}

func TestClosedClientAndBadInput(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	if _, err := c.Start(ctx, jobs.Spec{}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("empty spec: %v, want ErrInvalid", err)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "x", Argv: []string{"y"}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("command and argv: %v, want ErrInvalid", err)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "true", Env: []string{"NOEQUALS"}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("bad env: %v, want ErrInvalid", err)
	}
	var nilCtx context.Context
	if _, err := c.Get(nilCtx, "x"); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("nil context: %v, want ErrInvalid", err)
	}
	if _, err := jobs.Open(nilCtx, jobs.Options{}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Open with nil context: %v, want ErrInvalid", err)
	}
	if _, err := c.Log(ctx, "x", jobs.Range{Offset: -1}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("negative offset: %v, want ErrInvalid", err)
	}
	if _, err := c.Log(ctx, "x", jobs.Range{Grep: "("}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("bad regex: %v, want ErrInvalid", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, jobs.Filter{}); !errors.Is(err, jobs.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "true"}); !errors.Is(err, jobs.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	// SendKeys looked the job up before it checked the client (a nil
	// pointer panic, found by FuzzCLIArgs).
	if err := c.SendKeys(ctx, "x", []string{"Enter"}, false); !errors.Is(err, jobs.ErrClosed) {
		t.Errorf("SendKeys after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestZeroOptions(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("JOBS_DB", "")
	t.Setenv("JOBS_SCOPE", "")
	c, err := jobs.Open(context.Background(), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.DBPath(), filepath.Join(state, "jobs", "jobs.db"); got != want {
		t.Errorf("DBPath = %q, want %q", got, want)
	}
	if got := c.Scope(); got != jobs.DefaultScope {
		t.Errorf("Scope = %q, want %q", got, jobs.DefaultScope)
	}
}

func TestScopeIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	a := open(t, jobs.Options{DB: path, Scope: "a"})
	b := open(t, jobs.Options{DB: path, Scope: "b"})
	ctx := context.Background()
	j, err := a.Start(ctx, jobs.Spec{Command: "cat", Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(ctx, j.ID, 0)
	for name, call := range map[string]func(ref string) error{
		"get":   func(ref string) error { _, err := b.Get(ctx, ref); return err },
		"poll":  func(ref string) error { _, err := b.Poll(ctx, ref, jobs.PollOptions{}); return err },
		"new":   func(ref string) error { _, err := b.ReadNew(ctx, ref, jobs.PollOptions{}); return err },
		"log":   func(ref string) error { _, err := b.Log(ctx, ref, jobs.Range{}); return err },
		"write": func(ref string) error { _, err := b.Write(ctx, ref, []byte("x")); return err },
		"kill":  func(ref string) error { _, err := b.Kill(ctx, ref, 0); return err },
		"wait":  func(ref string) error { _, err := b.Wait(ctx, []string{ref}, jobs.WaitOptions{}); return err },
		"clear": func(ref string) error { return b.Clear(ctx, ref) },
		"rm":    func(ref string) error { _, err := b.Remove(ctx, ref); return err },
	} {
		for _, ref := range []string{j.ID, j.ID[:6], "shared"} {
			if err := call(ref); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("%s %s from another scope: %v, want ErrNotFound", name, ref, err)
			}
		}
	}
	list, err := b.List(ctx, jobs.Filter{})
	if err != nil || len(list) != 0 {
		t.Errorf("other scope's list = %d jobs, %v; want none", len(list), err)
	}
	for ev, err := range b.Events(ctx, jobs.EventOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("other scope sees event %+v", ev)
	}
}

// TestReadNewNeverRepeatsOrSkips interleaves writes to a job's stdin (it
// echoes them) with cursor reads, and checks the reads put together are
// exactly what the job wrote.
func TestReadNewNeverRepeatsOrSkips(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	var want, got strings.Builder
	const n = 1000
	for i := range n {
		line := fmt.Sprintf("line %d %s\n", i, strings.Repeat("é", i%7))
		want.WriteString(line)
		if _, err := c.Write(ctx, j.ID, []byte(line)); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Raw: true, Tail: 37})
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(r.Output.Text)
	}
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Raw: true, Tail: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if r.Output.Text == "" {
			break
		}
		got.WriteString(r.Output.Text)
	}
	if got.String() != want.String() {
		t.Fatalf("cursor reads differ from what was written: got %d bytes, want %d", got.Len(), want.Len())
	}
}

func TestConcurrentUse(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := c.Start(ctx, jobs.Spec{Command: fmt.Sprintf("echo job %d", i)})
			if err != nil {
				errs <- err
				return
			}
			for range 5 {
				if _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); err != nil {
					errs <- err
				}
				if _, err := c.List(ctx, jobs.Filter{}); err != nil {
					errs <- err
				}
			}
			res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{})
			if err != nil {
				errs <- err
				return
			}
			out, err := c.Log(ctx, j.ID, jobs.Range{})
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf("job %d\n", i); out.Text != want || res.Jobs[0].Status != jobs.StatusDone {
				errs <- fmt.Errorf("job %d: %s %q", i, res.Jobs[0].Status, out.Text)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// detachedStartHelper is a separate program that starts a detached job and
// exits at once, as an embedding program would.
func detachedStartHelper() {
	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{DB: os.Getenv("JOBS_TEST_DB"), Scope: "test", Detached: true, Executable: os.Getenv("JOBS_TEST_BIN")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	j, err := c.Start(ctx, jobs.Spec{Command: "echo started; exec sleep 60"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(j.ID)
	c.Close()
}

func TestDetachedJobOutlivesProgram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOBS_TEST_HELPER=detached-start", "JOBS_TEST_DB="+path, "JOBS_TEST_BIN="+jobsBin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	id := strings.TrimSpace(string(out))

	// The program has exited; the job runs on, visible to the CLI.
	list := exec.Command(jobsBin, "--db", path, "--scope", "test", "list", "--json")
	b, err := list.Output()
	if err != nil {
		t.Fatalf("jobs list: %v", err)
	}
	var page struct {
		Jobs []jobs.Job `json:"jobs"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("jobs list --json: %v\n%s", err, b)
	}
	listed := page.Jobs
	if len(listed) != 1 || listed[0].ID != id || listed[0].Status != jobs.StatusRunning {
		t.Fatalf("jobs list = %+v, want job %s running", listed, id)
	}
	if err := exec.Command(jobsBin, "--db", path, "--scope", "test", "kill", id).Run(); err != nil {
		t.Fatalf("jobs kill: %v", err)
	}
	c := open(t, jobs.Options{DB: path, Scope: "test", Detached: true})
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobs.StatusKilled {
		t.Errorf("status = %s, want killed", j.Status)
	}
}

func TestCLIKillsEmbeddedJob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := open(t, jobs.Options{DB: path})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "sleep 60 & exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(jobsBin, "--db", path, "--scope", "test", "kill", "--json", j.ID).CombinedOutput()
	if err != nil {
		t.Fatalf("jobs kill: %v\n%s", err, out)
	}
	var k jobs.KillResult
	if err := json.Unmarshal(out, &k); err != nil {
		t.Fatalf("kill --json: %v\n%s", err, out)
	}
	if k.Status != jobs.StatusKilled || len(k.Signalled) < 2 || len(k.Survivors) != 0 {
		t.Errorf("kill result %+v, want killed, 2+ pids signalled, no survivors", k)
	}
	got, err := c.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != jobs.StatusKilled {
		t.Errorf("status = %s, want killed", got.Status)
	}
}

// TestLostJobRunsHookOnce kills a detached supervisor mid-job: the next
// poll marks the job lost and starts nothing; the next supervisor runs its
// on_exit hook, once, with JOBS_STATUS=lost, though no supervisor saw the
// job end.
func TestLostJobRunsHookOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	marks := filepath.Join(dir, "hook.out")
	ctx := context.Background()
	c := open(t, jobs.Options{DB: path, Detached: true, Executable: jobsBin})
	j, err := c.Start(ctx, jobs.Spec{
		Command: "echo before; exec sleep 60",
		OnExit:  `echo "$JOBS_STATUS $JOBS_OUTPUT_TAIL" >> ` + marks,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, j.ID, 0)
	eventually(t, "output stored", func() bool {
		got, err := c.Get(ctx, j.ID)
		return err == nil && got.OutputBytes > 0
	})
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sup, err := d.FindSupervisor(ctx, j.Supervisor)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job lost", func() bool {
		got, err := c.Get(ctx, j.ID)
		return err == nil && got.Status == jobs.StatusLost
	})
	if sups, err := d.OpenSupervisors(ctx); err != nil || len(sups) != 1 || sups[0].ID != sup.ID {
		t.Fatalf("after the read, open supervisors %v (%v), want only the killed one", sups, err)
	}
	if _, err := os.Stat(marks); err == nil {
		t.Fatal("the read ran the lost job's hook")
	}
	// The next supervisor runs it.
	if _, err := c.Start(ctx, jobs.Spec{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	// The hook's event is recorded once its process has been waited for,
	// after it wrote its line.
	finished := func() int {
		h, err := c.History(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range h {
			if e.Kind == "hook" && strings.Contains(string(e.Detail), `"finished"`) {
				n++
			}
		}
		return n
	}
	eventually(t, "the hook's finished event", func() bool { return finished() > 0 })
	// Further polls and a gc must not run it again.
	for range 3 {
		if _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GC(ctx); err != nil {
		t.Fatal(err)
	}
	hooks := finished()
	b, _ := os.ReadFile(marks)
	if got := string(b); got != "lost before\n\n" || hooks != 1 {
		t.Errorf("hook wrote %q with %d finished hook events; want %q once", got, hooks, "lost before\n\n")
	}
}

// Reads of a running job record no access: its TTL starts when it ends,
// and the write would queue behind the supervisor's output batches. Reads
// of a finished job do, which is what its TTL counts from.
func TestReadsTouchFinishedJobsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := open(t, jobs.Options{DB: path})
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const old = "2000-01-01T00:00:00.000Z"
	setOld := func(id string) {
		t.Helper()
		if _, err := d.ExecContext(ctx, `UPDATE jobs SET last_access_at = ? WHERE id = ?`, old, id); err != nil {
			t.Fatal(err)
		}
	}
	lastAccess := func(id string) time.Time {
		t.Helper()
		j, err := d.FindJobByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.LastAccessAt
	}

	j, err := c.Start(ctx, jobs.Spec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	setOld(j.ID)
	if _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Log(ctx, j.ID, jobs.Range{}); err != nil {
		t.Fatal(err)
	}
	if got := lastAccess(j.ID); got.Year() != 2000 {
		t.Errorf("reads of a running job set last_access_at to %v", got)
	}

	if _, err := c.Kill(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	setOld(j.ID)
	before := time.Now().Add(-time.Second)
	if _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := lastAccess(j.ID); got.Before(before) {
		t.Errorf("a poll of a finished job left last_access_at at %v", got)
	}
}

// A Write to a job that does not read gives up after the client's
// WriteTimeout with ErrNotReading and the count the job took; CloseStdin
// still works.
func TestWriteNotReading(t *testing.T) {
	c := open(t, jobs.Options{WriteTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4<<20)
	n, err := c.Write(ctx, j.ID, data)
	if !errors.Is(err, jobs.ErrNotReading) {
		t.Fatalf("write to a job that does not read: %v, want ErrNotReading", err)
	}
	if n <= 0 || n >= len(data) {
		t.Errorf("Write took %d of %d bytes, want the pipe's worth", n, len(data))
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("took %d of %d bytes", n, len(data))) {
		t.Errorf("the error does not count what went in: %v", err)
	}
	var nr *jobs.NotReadingError
	if !errors.As(err, &nr) || nr.Took != n || nr.Size != len(data) || nr.Idle <= 0 {
		t.Errorf("the error is not a *NotReadingError with the counts: %#v", err)
	}
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Errorf("close stdin of a job that does not read: %v", err)
	}
	if _, err := c.Kill(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
}
