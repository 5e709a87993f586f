package mcp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentjobs/jobs/internal/testbin"
)

// jobsBin is the jobs binary the stdio tests run as `jobs mcp`; buildErr
// says why there is none.
var (
	jobsBin  string
	buildErr error
)

// TestMain builds the jobs binary once for the stdio tests (or links
// $JOBS_TEST_BINARY: internal/testbin), runs the tests, then ends the detached supervisors
// those tests started, which would otherwise idle for a minute.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobs-mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jobsBin, buildErr = testbin.Jobs(dir)
	code := m.Run()
	stopSupervisors(jobsBin)
	os.RemoveAll(dir)
	os.Exit(code)
}

// stopSupervisors ends the processes running exactly the test's jobs
// binary (the `jobs supervise` processes that `jobs mcp` started). The path
// is a fresh temporary file, so nothing else matches.
func stopSupervisors(bin string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if string(argv0) != bin {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// env is one isolated jobs installation: its own database and runtime
// directory.
type env struct {
	state, runtime string
}

func newEnv(t *testing.T) env {
	t.Helper()
	// Not t.TempDir: a detached supervisor may still write there when the
	// test ends; TestMain's cleanup stops it, and the OS removes the rest.
	root, err := os.MkdirTemp("", "jobs-mcp-env-")
	if err != nil {
		t.Fatal(err)
	}
	e := env{state: filepath.Join(root, "state"), runtime: filepath.Join(root, "run")}
	for _, d := range []string{e.state, e.runtime} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// serve starts `jobs mcp` for scope in e and returns a client session to
// it. The process ends when the test does (or earlier with close).
func (e env) serve(t *testing.T, scope string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cmd := exec.Command(jobsBin, "mcp")
	cmd.Env = append(os.Environ(),
		"XDG_STATE_HOME="+e.state,
		"XDG_RUNTIME_DIR="+e.runtime,
		"JOBS_SCOPE="+scope,
		"JOBS_DB=",
		"PI_BASH_YIELD_MS=",
		"PI_BASH_MAX_OUTPUT_CHARS=",
		"OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS=",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "jobs-mcp-test", Version: "0"}, opts).
		Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("start jobs mcp: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("jobs mcp (scope %s) stderr:\n%s", scope, stderr.String())
		}
	})
	return cs
}

// start runs command in the background and returns its sessionId.
func start(t *testing.T, cs *sdk.ClientSession, command string, extra map[string]any) string {
	t.Helper()
	args := map[string]any{"command": command, "background": true}
	for k, v := range extra {
		args[k] = v
	}
	r := callOK[executeResult](t, cs, "execute_command", args)
	if r.SessionID == "" || r.Status != "running" {
		t.Fatalf("background start of %q: got %+v, want status running and a sessionId", command, r)
	}
	return r.SessionID
}

// waitDone blocks (server-side, with process wait) until the job is
// finished and returns the wait result.
func waitDone(t *testing.T, cs *sdk.ClientSession, id string) pollResult {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 10})
		if r.WaitReason == "exited" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still %s after 3 minutes", id, r.Status)
		}
	}
}

// terminal says whether status, in OpenClaw's words, is an end.
func terminal(status string) bool {
	switch status {
	case "done", "error", "killed":
		return true
	}
	return false
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}
