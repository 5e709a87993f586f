package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLogFollowExitsWithJobStatus: log -f ends with the job's exit status,
// as wait does, and says on stderr how the job ended.
func TestLogFollowExitsWithJobStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("echo hi; exit 3")
	r := e.run2("log", id, "-f", "--offset", "0")
	if r.code != 3 || r.stdout != "hi\n" || !strings.Contains(r.stderr, "exit 3") {
		t.Errorf("log -f of a job that exited 3: %v", r)
	}
}

// TestWaitUntilNeverMatchedSaysSo: a wait --until whose jobs ended without
// a match says that no line matched, besides exiting 125.
func TestWaitUntilNeverMatchedSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("echo hi")
	r := e.run2("wait", id, "--until", "ready")
	if r.code != ExitNotHappened || !strings.Contains(r.stdout, `no line matched --until "ready"`) {
		t.Errorf("wait --until that never matched: %v", r)
	}
}

// TestShortPrefixSaysMinimum: an id prefix of fewer than 4 characters
// that is no job's name says how many characters an id prefix needs.
func TestShortPrefixSaysMinimum(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("true")
	checkError(t, e.run2("status", id[:3]), ExitError, "an id prefix needs at least 4 characters")
	// A name of three letters still works.
	e.start("--name", "web", "sleep 300")
	e.ok("status", "web")
}

func TestDidYouMean(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, "did you mean status?"},
		{[]string{"lsit"}, "did you mean list?"},
		{[]string{"help", "wiat"}, "did you mean wait?"},
		{[]string{"log", "abcd", "--tial", "3"}, "did you mean --tail?"},
		{[]string{"start", "--timout", "1m", "true"}, "did you mean --timeout?"},
		{[]string{"--jsn", "list"}, "did you mean --json?"},
	} {
		checkError(t, e.run2(tc.args...), ExitUsage, tc.want)
	}
	// Nothing close: no guess.
	r := e.run2("frobnicate")
	checkError(t, r, ExitUsage, `unknown command "frobnicate"`)
	if strings.Contains(r.stderr, "did you mean") {
		t.Errorf("a guess for a word close to nothing: %v", r)
	}
}

// TestPipedLogStartsAtLine: the default read (the last 500 characters)
// printed to a pipe starts at a line, so head -1 gives a whole line.
func TestPipedLogStartsAtLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("for i in $(seq 100); do echo \"line $i of the output, padded to a fair length\"; done")
	e.ok("wait", id)
	r := e.run2("log", id)
	first, _, _ := strings.Cut(r.stdout, "\n")
	if r.code != 0 || !strings.HasPrefix(first, "line ") {
		t.Errorf("first line %q of the default read\n%v", first, r)
	}
	if !strings.HasSuffix(r.stdout, "line 100 of the output, padded to a fair length\n") {
		t.Errorf("the read does not end with the last line\n%v", r)
	}
	var n int
	if _, err := fmt.Sscanf(first, "line %d", &n); err != nil || !strings.Contains(r.stderr, fmt.Sprintf("before line %d", n)) {
		t.Errorf("the note does not point at the first line shown (%d)\n%v", n, r)
	}
}

// TestSeveralLabels: --label given more than once keeps every value (it
// kept only the last), and list --label finds the job by any of them.
func TestSeveralLabels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("--label", "nightly", "--label", "db, slow", "true")
	var s struct {
		Job struct {
			Label string `json:"label"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(e.ok("--json", "status", id)), &s); err != nil {
		t.Fatal(err)
	}
	if s.Job.Label != "nightly, db, slow" {
		t.Errorf("label %q, want both values", s.Job.Label)
	}
	for _, l := range []string{"nightly", "slow"} {
		if out := e.ok("list", "--label", l); !strings.Contains(out, id) {
			t.Errorf("list --label %s does not find the job:\n%s", l, out)
		}
	}
}
