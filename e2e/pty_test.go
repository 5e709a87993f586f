package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runChecks runs e2e/mcpclient/checks.mjs GROUP in w, through the
// official TypeScript SDK client, and fails the test for each check that
// failed.
func runChecks(t *testing.T, w *world, group string) {
	t.Helper()
	node, dir := nodeClient(t, "the MCP client checks")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "checks.mjs", jobsBin, group)
	cmd.Dir = dir
	cmd.Env = w.mcpEnviron()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	checks, done := 0, false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("check line %q: %v", sc.Text(), err)
			continue
		}
		switch {
		case line["done"] == true:
			done = true
		case line["ok"] != true:
			t.Errorf("%s: %s: %v", group, line["check"], line["error"])
		default:
			checks++
			t.Logf("%s", sc.Text())
		}
	}
	if runErr != nil || !done {
		t.Errorf("node checks.mjs %s: %v (finished: %v)\nstderr: %s", group, runErr, done, tailOf(stderr.String(), 4000))
	}
	if checks == 0 {
		t.Errorf("%s: no check passed", group)
	}
}

// TestMCPClientPTY drives the pty mode and --merge through execute_command
// and process with the TypeScript SDK client: a python dev server with no
// -u is seen serving at once on a terminal, while the same block-buffered
// line into a pipe is not; a coloured ready line matches; a prompt shows
// waiting_for_input and write answers it; send_keys types and C-d ends
// input; kill ends the tree; the exit code is recorded; merged output
// keeps its order.
func TestMCPClientPTY(t *testing.T) {
	t.Parallel() // a world of its own
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	w := newWorld(t)
	w.scope = "mcp-pty"
	runChecks(t, w, "pty")
}

// TestPTYCLI is the pty mode through the CLI.
func TestPTYCLI(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)

	// One stream in the order written, and the exit status.
	r := w.jobs("start", "--pty", "--wait", "test -t 1 && echo tty; echo out; echo err >&2; exit 3")
	if r.code != 3 {
		t.Errorf("start --pty --wait: %v, want exit 3", r)
	}
	if got, want := strings.ReplaceAll(r.stdout, "\r\n", "\n"), "tty\nout\nerr\n"; got != want {
		t.Errorf("start --pty --wait printed %q, want %q", got, want)
	}

	// The window size.
	id := w.start("--pty", "--size", "100x30", "stty size")
	w.ok("wait", id)
	if got := strings.TrimSpace(w.ok("log", id)); got != "30 100" {
		t.Errorf("stty size in a 100x30 pty job = %q", got)
	}

	// A prompt: waiting for input, write answers it, send-keys types.
	id = w.start("--pty", `printf 'name? '; read x; echo "hi $x"; read y; echo "then $y"`)
	waitFor(t, 30*time.Second, "the pty job to wait for input", func() bool {
		var s struct {
			Job struct {
				WaitingForInput bool `json:"waiting_for_input"`
			} `json:"job"`
		}
		json.Unmarshal([]byte(w.ok("--json", "status", id)), &s)
		return s.Job.WaitingForInput
	})
	w.ok("write", "--newline", id, "bob")
	w.ok("wait", id, "--until", "hi bob", "--timeout", "30s")
	w.ok("send-keys", id, "more", "Enter")
	w.ok("wait", id, "--timeout", "30s")
	if got := w.ok("log", id); !strings.Contains(got, "hi bob") || !strings.Contains(got, "then more") {
		t.Errorf("log = %q", got)
	}

	// kill ends the tree: a background child of the job's shell too.
	id = w.start("--pty", `sleep 300 & echo "child $!"; wait`)
	w.ok("wait", id, "--until", "child [0-9]+", "--timeout", "30s")
	var pid int
	for _, f := range strings.Fields(w.ok("log", id)) {
		if n, err := strconv.Atoi(f); err == nil {
			pid = n
		}
	}
	if pid == 0 || !procAlive(pid) {
		t.Fatalf("no live child pid in %q", w.ok("log", id))
	}
	w.ok("kill", id)
	waitFor(t, 30*time.Second, "the job's child to be gone", func() bool { return !procAlive(pid) })
	if j, _ := w.status(id); j.Status != "killed" {
		t.Errorf("status after kill = %s", j.Status)
	}

	// Bad combinations: one line, non-zero exit.
	for _, args := range [][]string{
		{"start", "--pty", "--tmux", "true"},
		{"start", "--pty", "--size", "80", "true"},
		{"start", "--size", "80x24", "true"},
		{"start", "--pty", "--merge", "true"},
		{"start", "--pty", "--no-stdin", "true"},
	} {
		r := w.jobs(args...)
		if r.code == 0 || !strings.HasPrefix(r.stderr, "jobs: ") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: want a short error", r)
		}
	}
}

// TestMergeCLI: --merge stores stdout and stderr as one stream, stdout, in
// the order written.
func TestMergeCLI(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)
	id := w.start("--merge", `for i in 1 2 3 4 5 6 7 8 9 10; do echo out$i; echo err$i >&2; done`)
	w.ok("wait", id)
	var want strings.Builder
	for i := 1; i <= 10; i++ {
		want.WriteString("out" + strconv.Itoa(i) + "\nerr" + strconv.Itoa(i) + "\n")
	}
	if got := w.ok("log", id, "--stream", "stdout"); got != want.String() {
		t.Errorf("merged stdout = %q, want %q", got, want.String())
	}
	if r := w.jobs("log", id, "--stream", "stderr"); r.code != 0 || r.stdout != "" {
		t.Errorf("stderr of a merged job: %v, want nothing", r)
	}
}
