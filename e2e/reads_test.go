package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestReadsStartNoProcess: a read that finds the jobs of a supervisor
// killed with SIGKILL records them lost and starts nothing, neither a
// supervisor nor the jobs' exit hooks, whichever front end reads (CLI, MCP,
// jobs ui, pkg/jobs). The hooks run once each, by the next supervisor that
// starts.
func TestReadsStartNoProcess(t *testing.T) {
	w := newWorld(t)
	// The pkg/jobs client below runs in this process: give it the world's
	// runtime directory, where a supervisor it started would live.
	t.Setenv("XDG_RUNTIME_DIR", w.run)
	t.Setenv("XDG_STATE_HOME", w.state)
	ctx := context.Background()
	d := w.sqlDB()

	statusOf := func(id string) string {
		var s string
		if err := d.QueryRow(`SELECT status FROM jobs WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatalf("status of %s: %v", id, err)
		}
		return s
	}
	var client *jobs.Client
	pkgClient := func() *jobs.Client {
		if client == nil {
			c, err := jobs.Open(ctx, jobs.Options{DB: w.dbPath(), Detached: true, OnlyReads: true, Executable: jobsBin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			client = c
		}
		return client
	}
	var uiURL string
	get := func(path string) {
		if uiURL == "" {
			uiURL = w.ui()
		}
		resp, err := http.Get(uiURL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
	cli := func(args ...string) func(string) {
		return func(id string) {
			args := append(append([]string(nil), args...), id)
			if r := w.jobs(args...); r.stderr != "" && r.code != 0 && !strings.Contains(r.stdout+r.stderr, "lost") {
				t.Fatalf("%v", r)
			}
		}
	}
	reads := []struct {
		name string
		read func(id string)
	}{
		{"poll", cli("poll")},
		{"poll --json", cli("--json", "poll")},
		{"poll --new", cli("poll", "--new")},
		{"status", cli("status")},
		{"list", func(string) { w.ok("list") }},
		{"list --json", func(string) { w.ok("--json", "list") }},
		{"log", cli("log")},
		{"wait", cli("wait", "--timeout", "30s")},
		{"ui list", func(string) { get("") }},
		{"ui job", func(id string) { get("job/" + id) }},
		{"mcp poll", func(id string) {
			if text, isErr := mcpCall(t, w.mcp(), "process", map[string]any{"action": "poll", "sessionId": id}); isErr {
				t.Fatalf("mcp poll: %s", text)
			}
		}},
		{"mcp list", func(string) {
			if text, isErr := mcpCall(t, w.mcp(), "process", map[string]any{"action": "list"}); isErr {
				t.Fatalf("mcp list: %s", text)
			}
		}},
		{"pkg Get", func(id string) {
			if _, err := pkgClient().Get(ctx, id); err != nil {
				t.Fatal(err)
			}
		}},
		{"pkg List", func(string) {
			if _, err := pkgClient().List(ctx, jobs.Filter{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"pkg Poll", func(id string) {
			if _, err := pkgClient().Poll(ctx, id, jobs.PollOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"pkg Wait", func(id string) {
			if _, err := pkgClient().Wait(ctx, []string{id}, jobs.WaitOptions{Timeout: 30 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}},
	}

	var ids, markers []string
	t.Cleanup(func() {
		for _, id := range ids {
			w.jobs("kill", "--grace", "100ms", id) // the helpers outlive their supervisor
		}
	})
	for i, r := range reads {
		marker := filepath.Join(w.base, "hook-"+strconv.Itoa(i))
		id := w.start(append([]string{"--on-exit", "echo ran >> " + marker}, helper("ready-idle")...)...)
		ids, markers = append(ids, id), append(markers, marker)
		w.waitOutput(id, "ready")
		pid := w.supervisorPID()
		lock := w.supervisorLock(pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the killed supervisor's lock to be free", func() bool { return lockFree(lock) })
		if s := statusOf(id); s != "running" {
			t.Fatalf("%s: before the read the job is already %s", r.name, s)
		}

		r.read(id)

		if s := statusOf(id); s != "lost" {
			t.Errorf("%s: the job reads %s after the read, want lost", r.name, s)
		}
		if n := w.liveSupervisors(); n != 0 {
			t.Errorf("%s: a read started %d supervisor processes", r.name, n)
		}
		var hooks int
		if err := d.QueryRow(`SELECT count(*) FROM events WHERE job_id = ? AND kind = 'hook'`, id).Scan(&hooks); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); err == nil || hooks != 0 {
			t.Errorf("%s: a read ran the exit hook of the lost job", r.name)
		}
	}

	// The next supervisor runs every hook that is due, once.
	w.start("--", "true")
	// A marker is whole once it ends its line: the hook's shell creates
	// the file (>>) before echo writes to it.
	waitFor(t, 30*time.Second, "every lost job's hook to have run", func() bool {
		for _, m := range markers {
			if b, err := os.ReadFile(m); err != nil || !strings.HasSuffix(string(b), "\n") {
				return false
			}
		}
		return true
	})
	for i, m := range markers {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "ran\n" {
			t.Errorf("%s: hook marker holds %q, want one run", reads[i].name, b)
		}
	}
}

// liveSupervisors counts the `jobs supervise` processes of the world: those
// its database records as not ended and those running with its runtime
// directory.
func (w *world) liveSupervisors() int {
	w.t.Helper()
	seen := map[int]bool{}
	rows, err := w.sqlDB().Query(`SELECT pid FROM supervisors WHERE ended_at IS NULL`)
	if err != nil {
		w.t.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			w.t.Fatal(err)
		}
		if procAlive(pid) && isSupervisorOf(pid, jobsBin) {
			seen[pid] = true
		}
	}
	rows.Close()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !procAlive(pid) || !isSupervisorOf(pid, jobsBin) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00XDG_RUNTIME_DIR="+w.run+"\x00")) {
			seen[pid] = true
		}
	}
	return len(seen)
}
