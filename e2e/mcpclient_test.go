package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// scenarioBound is the call bound the scenarios run under
// (JOBS_MCP_CALL_BOUND_MS), and scenarioBuild how long their failing build
// runs: longer than the bound, as a 40 s build is longer than a client's
// patience, so the build must cross a bound to finish. The default bound
// (50 s) would make the test last minutes for the same structure.
const (
	scenarioBound = 8 * time.Second
	scenarioBuild = 12
)

// scenarioResult is one line of e2e/mcpclient/scenarios.mjs.
type scenarioResult struct {
	Scenario        string  `json:"scenario"`
	OK              bool    `json:"ok"`
	Error           string  `json:"error"`
	Calls           int     `json:"calls"`
	Chars           int     `json:"chars"`
	StructuredChars int     `json:"structured_chars"`
	LongestCallMS   int64   `json:"longest_call_ms"`
	ClientTimeouts  int     `json:"client_timeouts"`
	BoundCutCalls   int     `json:"bound_cut_calls"`
	Seconds         float64 `json:"seconds"`
	// AnnotationsHonest: the process tool, which kills and removes (its
	// documents' actions), does not claim to be non-destructive.
	AnnotationsHonest bool           `json:"annotations_honest"`
	Skipped           string         `json:"skipped"`
	Output            int            `json:"output"`
	WaitingForInput   bool           `json:"waiting_for_input"`
	PromptSeenMS      int64          `json:"prompt_seen_ms"`
	PromptShown       bool           `json:"prompt_shown"`
	Escaped           bool           `json:"escaped"`
	Verbatim          bool           `json:"verbatim"`
	WorstLagMS        int64          `json:"worst_lag_ms"`
	LearnedLateMS     map[string]int `json:"learned_late_ms"`
	PromptMatched     bool           `json:"prompt_matched"`
	FirstStatus       string         `json:"first_status"`
	FirstText         string         `json:"first_text"`
	RuntimeMS         int64          `json:"runtime_ms"`
}

// nodeClient returns node and the directory of the TypeScript SDK client
// scripts, their packages installed. Without node the test is skipped,
// except with CI=true, where it fails: what says it needs node.
func nodeClient(t *testing.T, what string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is not installed; %s need it (CI=true)", what)
		}
		t.Skip("node is not installed")
	}
	if dir, err = filepath.Abs("mcpclient"); err != nil {
		t.Fatal(err)
	}
	installClient(t, dir)
	return node, dir
}

// TestMCPClientScenarios drives `jobs mcp` through the official TypeScript
// SDK client (its default 60 s request timeout) in seven everyday
// scenarios and holds each to the calls and characters an agent should
// pay. With CI=true a missing node fails the test instead of skipping it.
func TestMCPClientScenarios(t *testing.T) {
	t.Parallel() // a world of its own; waits on node and jobs more than it computes
	if testing.Short() {
		t.Skip("the scenarios take about 15 s")
	}
	node, dir := nodeClient(t, "the MCP client scenarios")

	w := newWorld(t)
	// The REPL scenario's tmux session goes on a server of its own.
	sock := filepath.Join(w.base, "tmux.sock")
	w.extra = append(w.extra, "JOBS_TMUX_SOCKET="+sock)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "scenarios.mjs", jobsBin)
	cmd.Dir = dir
	cmd.Env = append(w.environ(),
		"JOBS_MCP_CALL_BOUND_MS="+itoa(scenarioBound.Milliseconds()),
		"BUILD_SECONDS="+itoa(scenarioBuild))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	got := map[string]scenarioResult{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r scenarioResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("scenario line %q: %v", sc.Text(), err)
			continue
		}
		got[r.Scenario] = r
		t.Logf("%-10s calls %2d (%d cut by the bound)  chars %6d  structured %6d  longest call %5d ms  %.1f s", r.Scenario, r.Calls, r.BoundCutCalls, r.Chars, r.StructuredChars, r.LongestCallMS, r.Seconds)
	}
	if runErr != nil {
		t.Errorf("node scenarios.mjs: %v\nstderr: %s", runErr, tailOf(stderr.String(), 4000))
	}

	// Times are reported, never asserted: they measure the machine as
	// much as jobs (bench/run.sh is where they are compared). What is
	// asserted is the outcome: no call ran into the client's timeout, and
	// the calls that must return before their job ends did.
	for name, r := range got {
		if !r.OK {
			t.Errorf("%s: %s", name, r.Error)
		}
		if r.ClientTimeouts > 0 {
			t.Errorf("%s: %d call(s) ended in a client timeout", name, r.ClientTimeouts)
		}
		if r.Skipped == "" && !r.AnnotationsHonest {
			t.Errorf("%s: the process tool, which kills and removes, is annotated non-destructive", name)
		}
	}
	// want holds a scenario to its calls: those an agent needs when
	// every job is as quick as it should be, of which cut were expected to
	// last the server's whole call bound. Each further call that lasted
	// the bound is one the machine forced (a loaded machine runs `sleep
	// 0.25` in a loop at half speed), and is allowed; a call that did not
	// is one too many.
	want := func(name string, calls, cut int, check func(r scenarioResult) string) {
		t.Helper()
		r, ok := got[name]
		allowed := calls + max(0, r.BoundCutCalls-cut)
		switch {
		case !ok:
			t.Errorf("%s: no result", name)
		case r.Skipped != "":
			t.Logf("%s skipped: %s", name, r.Skipped)
		case r.Calls > allowed:
			t.Errorf("%s: %d calls (%d of them cut by the call bound), want at most %d", name, r.Calls, r.BoundCutCalls, allowed)
		default:
			if msg := check(r); msg != "" {
				t.Errorf("%s: %s", name, msg)
			}
		}
	}
	none := func(scenarioResult) string { return "" }
	want("short", 1, 0, func(r scenarioResult) string {
		if r.BoundCutCalls == 0 && r.Chars > 120 {
			return "the result of a 5-byte output is " + itoa(int64(r.Chars)) + " characters, want at most 120"
		}
		return ""
	})
	// The build runs its 12 s across two calls, the first cut at the call
	// bound.
	if r, ok := got["build"]; ok {
		t.Logf("build: ran %d ms", r.RuntimeMS)
	}
	want("build", 2, 1, func(r scenarioResult) string {
		// The build runs longer than the call bound: the first call
		// must come back with the job still running.
		if r.FirstStatus != "running" {
			return "execute_command with yieldMs 90000 on a " + itoa(int64(scenarioBuild)) + " s build came back " + r.FirstStatus + ", not running: the call bound of " + scenarioBound.String() + " did not cut it short"
		}
		return ""
	})
	want("devserver", 3, 0, none)
	want("prompt", 3, 0, func(r scenarioResult) string {
		if !r.WaitingForInput || !r.PromptShown {
			return fmt.Sprintf("execute_command did not return the prompt with waiting_for_input: status %s, waiting_for_input %v, prompt shown %v, after %d ms: %q",
				r.FirstStatus, r.WaitingForInput, r.PromptShown, r.PromptSeenMS, r.FirstText)
		}
		t.Logf("prompt: the prompt (written after 0.5 s) was reported after %d ms", r.PromptSeenMS)
		return ""
	})
	want("coloured", 1, 0, func(r scenarioResult) string {
		if r.Escaped || !r.Verbatim {
			return "the output is not plain text (< > & escaped or missing)"
		}
		return ""
	})
	want("parallel", 6, 0, func(r scenarioResult) string {
		if len(r.LearnedLateMS) != 3 {
			return fmt.Sprintf("the ends of %d of 3 jobs were learned", len(r.LearnedLateMS))
		}
		t.Logf("parallel: each end learned at most %d ms after it happened (%v)", r.WorstLagMS, r.LearnedLateMS)
		return ""
	})
	want("pydev", 3, 0, none)
	want("repl", 4, 0, func(r scenarioResult) string {
		if !r.PromptMatched {
			return `wait until=">>> $" did not match the REPL's prompt`
		}
		return ""
	})
}

// installClient installs the locked client packages when they are missing.
// The tests that need them run in parallel, and two `npm ci` at once in one
// directory leave it half installed (each starts by removing
// node_modules), so they take turns; an install counts once npm has written
// node_modules/.package-lock.json, which it does when it is done.
func installClient(t *testing.T, dir string) {
	t.Helper()
	clientInstall.Lock()
	defer clientInstall.Unlock()
	if clientInstalled(dir) {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if !clientInstalled(dir) {
		t.Fatalf("npm ci in %s left no complete node_modules", dir)
	}
}

var clientInstall sync.Mutex

func clientInstalled(dir string) bool {
	for _, f := range []string{".package-lock.json", "@modelcontextprotocol/sdk/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", f)); err != nil {
			return false
		}
	}
	return true
}

func itoa[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

func tailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
