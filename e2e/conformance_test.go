package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// conformanceCheck is one line of a conformance suite
// (e2e/mcpclient/conformance/*.mjs): one requirement of a seed document.
type conformanceCheck struct {
	Suite       string `json:"suite"`
	ID          string `json:"id"`
	Requirement string `json:"requirement"`
	OK          bool   `json:"ok"`
	Error       string `json:"error"`
	Done        bool   `json:"done"`
}

// runConformance runs the conformance suite script (a file of
// e2e/mcpclient/conformance) against the built binary in w, through the
// official TypeScript SDK client. Each requirement that does not hold
// fails the test with its id; a suite that stops before its end fails it
// too. It returns the checks, in order.
func runConformance(t *testing.T, w *world, script string) []conformanceCheck {
	t.Helper()
	node, dir := nodeClient(t, "the conformance suites")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("conformance", script), jobsBin)
	cmd.Dir = dir
	cmd.Env = w.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var checks []conformanceCheck
	done := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c conformanceCheck
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Errorf("%s: line %q: %v", script, sc.Text(), err)
			continue
		}
		if c.Done {
			done = true
			continue
		}
		checks = append(checks, c)
		if !c.OK {
			t.Errorf("%s %s (%s): %s", c.Suite, c.ID, c.Requirement, c.Error)
		}
	}
	if !done {
		t.Errorf("%s stopped before its end: %v\nstderr: %s", script, runErr, tailOf(stderr.String(), 4000))
	}
	passed := 0
	for _, c := range checks {
		if c.OK {
			passed++
		}
	}
	t.Logf("%s: %d of %d requirements hold", script, passed, len(checks))
	return checks
}
