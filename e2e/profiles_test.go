package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// replayProfile runs e2e/mcpclient/profiles.mjs for profile in w: the
// original's example calls through the official TypeScript SDK client. It
// fails the test for each check that failed and returns the ids of the
// jobs the replay started.
func replayProfile(t *testing.T, w *world, profile string) []string {
	t.Helper()
	node, dir := nodeClient(t, "the profile replays")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "profiles.mjs", jobsBin, profile)
	cmd.Dir = dir
	cmd.Env = w.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var ids []string
	checks, done := 0, false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Check string   `json:"check"`
			OK    bool     `json:"ok"`
			Error string   `json:"error"`
			Done  bool     `json:"done"`
			IDs   []string `json:"ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("replay line %q: %v", sc.Text(), err)
			continue
		}
		switch {
		case line.Done:
			done, ids = true, line.IDs
		case !line.OK:
			t.Errorf("%s: %s: %s", profile, line.Check, line.Error)
		default:
			checks++
		}
	}
	if runErr != nil || !done {
		t.Errorf("node profiles.mjs %s: %v (finished: %v)\nstderr: %s", profile, runErr, done, tailOf(stderr.String(), 4000))
	}
	t.Logf("%s: %d checks passed", profile, checks)
	return ids
}

// TestProfileClaudeCode replays the Claude Code tools' calls (run_command with
// run_in_background, bash_output with its only-new reads and regex filter,
// kill_shell, list_shells) against `jobs mcp --profile claude-code`, and
// finds the jobs it started in the CLI.
func TestProfileClaudeCode(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)
	w.scope = "profile-claude"
	ids := replayProfile(t, w, "claude-code")
	list := w.ok("list", "--json")
	for _, id := range ids {
		if !strings.Contains(list, id) {
			t.Errorf("job %s, started under claude-code, is not in jobs list", id)
		}
	}
}

// TestProfileOpenClaw replays OpenClaw's calls against `jobs mcp`
// chosen by JOBS_MCP_PROFILE=openclaw (the default).
func TestProfileOpenClaw(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)
	w.scope = "profile-openclaw"
	w.extra = append(w.extra, "JOBS_MCP_PROFILE=openclaw")
	ids := replayProfile(t, w, "openclaw")
	list := w.ok("list", "--json")
	for _, id := range ids {
		if !strings.Contains(list, id) {
			t.Errorf("job %s, started under openclaw, is not in jobs list", id)
		}
	}
}

// TestProfileDuragent replays Duragent's calls (spawn_process with wait
// false and true, process by handle) against `jobs mcp --profile duragent`.
func TestProfileDuragent(t *testing.T) {
	t.Parallel() // a world of its own
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	w := newWorld(t)
	w.scope = "profile-duragent"
	sock := filepath.Join(w.base, "tmux.sock")
	// The profile's .duragent/processes files go to the world, not to
	// the client's working directory in the source tree.
	w.extra = append(w.extra, "JOBS_TMUX_SOCKET="+sock, "JOBS_DURAGENT_DIR="+w.base)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	ids := replayProfile(t, w, "duragent")
	list := w.ok("list", "--json")
	for _, id := range ids {
		if !strings.Contains(list, id) {
			t.Errorf("job %s, started under duragent, is not in jobs list", id)
		}
	}
}

// TestProfileMacOSShell replays the macOS Shell MCP's example usage against `jobs mcp
// --profile macos-shell`.
func TestProfileMacOSShell(t *testing.T) {
	t.Parallel() // a world of its own
	w := newWorld(t)
	w.scope = "profile-macos"
	ids := replayProfile(t, w, "macos-shell")
	list := w.ok("list", "--json")
	for _, id := range ids {
		if !strings.Contains(list, id) {
			t.Errorf("job %s, started under macos-shell, is not in jobs list", id)
		}
	}
}

// TestProfileUnknown: --profile and JOBS_MCP_PROFILE refuse a name that
// is no profile, with one line.
func TestProfileUnknown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.jobs("mcp", "--profile", "nope")
	if r.code == 0 || !strings.HasPrefix(r.stderr, "jobs: ") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 || !strings.Contains(r.stderr, "claude-code") {
		t.Errorf("unknown profile: %v", r)
	}
	w.extra = append(w.extra, "JOBS_MCP_PROFILE=nope")
	if r := w.jobs("mcp"); r.code == 0 || !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("unknown JOBS_MCP_PROFILE: %v", r)
	}
}
