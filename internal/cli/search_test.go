package cli

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/testlong"
)

type searchJSON struct {
	Matches []struct {
		Line   int64  `json:"line"`
		Offset int64  `json:"offset"`
		Text   string `json:"text"`
	} `json:"matches"`
	Shown    int64 `json:"shown"`
	Count    int64 `json:"count"`
	Searched int64 `json:"searched_bytes"`
	Gaps     []struct {
		Start int64 `json:"start"`
		End   int64 `json:"end"`
	} `json:"not_searched"`
	TotalBytes int64 `json:"total_bytes"`
}

// TestLogGrepSearchesWholeLog: --grep finds every matching line of a log
// of several pages (the first line, lines across page bounds, the last
// line), counts them as grep -c does on the same bytes, gives each line's
// number and offset as the other reads count them, and --tail/--lines
// apply to the matches.
func TestLogGrepSearchesWholeLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// More than one page of the search (4 MiB): about 4.8 MB, 6.6 MB with
	// the long sizes.
	n := testlong.Pick(700000, 900000)
	id := e.start("--max-output", "0", fmt.Sprintf("echo 'ERROR first'; seq %d; echo 'ERROR last'", n))
	e.ok("wait", id)
	// The log is known line by line, so the matches of (^ERROR|77$) are
	// too: the first and last lines and every number ending in 77. The
	// log is read back whole and compared, so that they are counted on
	// the bytes the search sees. (Matching the expression over the
	// 700,000 lines here instead cost the race-instrumented test binary
	// 15 s of CPU.)
	var log strings.Builder
	log.WriteString("ERROR first\n")
	want := []string{"1:ERROR first"}
	for i := 1; i <= n; i++ {
		log.WriteString(strconv.Itoa(i))
		log.WriteByte('\n')
		if i%100 == 77 {
			want = append(want, fmt.Sprintf("%d:%d", i+1, i))
		}
	}
	log.WriteString("ERROR last\n")
	want = append(want, fmt.Sprintf("%d:ERROR last", n+2))
	if all := e.ok("log", id, "--all"); all != log.String() {
		t.Fatalf("log --all: %d bytes, want the %d of the command's output", len(all), log.Len())
	}
	const expr = `(^ERROR|77$)`
	r := e.run2("log", id, "--grep", expr)
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d matches, want %d (grep -c on the same bytes); first %q last %q", len(got), len(want), got[0], got[len(got)-1])
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("%d lines matched", len(want))) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("summary: %q", r.stderr)
	}

	var js searchJSON
	e.jsonOf(&js, "log", id, "--grep", expr, "--tail", "2")
	if js.Count != int64(len(want)) || js.Shown != 2 || len(js.Matches) != 2 || js.Matches[1].Text != "ERROR last" || len(js.Gaps) != 0 || js.Searched != js.TotalBytes {
		t.Errorf("--tail 2 --json: %+v", js)
	}
	for _, m := range js.Matches {
		if line := e.read("log", id, "--from-line", strconv.FormatInt(m.Line, 10), "--lines", "1"); line != m.Text+"\n" {
			t.Errorf("line %d reads %q, the search said %q", m.Line, line, m.Text)
		}
		if b := e.read("log", id, "--offset", strconv.FormatInt(m.Offset, 10), "--limit", strconv.Itoa(len(m.Text))); b != m.Text {
			t.Errorf("offset %d reads %q, the search said %q", m.Offset, b, m.Text)
		}
	}
	r = e.run2("log", id, "--grep", expr, "--lines", "1")
	if r.stdout != want[0]+"\n" || !strings.Contains(r.stderr, "showing the first 1") {
		t.Errorf("--lines 1: %v", r)
	}
	// --from-line starts the search there.
	r = e.run2("log", id, "--grep", "^ERROR", "--from-line", "2")
	if r.stdout != want[len(want)-1]+"\n" {
		t.Errorf("--from-line 2: %v", r)
	}
}

// TestLogGrepSaysWhatWasNotSearched: with the middle of the log evicted by
// the output cap, --grep finds the matches on both sides, numbers the lines
// after the gap as the log does, and says which bytes it did not search.
func TestLogGrepSaysWhatWasNotSearched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("--max-output", "2MiB", "echo 'ERROR first'; seq 1000000; echo 'ERROR last'")
	e.ok("wait", id)
	var js searchJSON
	e.jsonOf(&js, "log", id, "--grep", "^ERROR")
	if js.Count != 2 || len(js.Gaps) != 1 || js.Gaps[0].End <= js.Gaps[0].Start || js.Searched+js.Gaps[0].End-js.Gaps[0].Start != js.TotalBytes {
		t.Fatalf("search over an evicted middle: %+v", js)
	}
	if last := js.Matches[1]; last.Line != 1000002 {
		t.Errorf("the last line is numbered %d, want 1000002", last.Line)
	}
	r := e.run2("log", id, "--grep", "^ERROR")
	if !strings.Contains(r.stderr, "not searched") || !strings.Contains(r.stderr, "evicted by the output cap") {
		t.Errorf("the summary does not say what was not searched: %v", r)
	}
}
