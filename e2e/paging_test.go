package e2e

// A read's offsets and line numbers describe the text it returned: an
// agent that pages from them with `log --offset` or `log --from-line`
// lands exactly on the text it was shown.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func init() {
	// varied-lines N: N lines of varied length (empty ones, long ones,
	// some with two-byte characters), the same every run.
	helperModes["varied-lines"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		_, err := fmt.Print(variedLines(n))
		return err
	}
}

func variedLines(n int) string {
	r := rand.New(rand.NewPCG(14, 3))
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d:", i)
		k := r.IntN(90)
		if i%17 == 0 {
			k = 0
		} else if i%53 == 0 {
			k = 400 + r.IntN(300)
		}
		for j := 0; j < k; j++ {
			if r.IntN(9) == 0 {
				b.WriteString("é")
			} else {
				b.WriteByte(byte('a' + r.IntN(26)))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// page is the part of the output object the paging checks read.
type page struct {
	Text          string `json:"output"`
	Start         int64  `json:"start"`
	End           int64  `json:"end"`
	NextOffset    int64  `json:"next_offset"`
	FirstLine     int64  `json:"first_line"`
	Lines         int64  `json:"lines"`
	TotalBytes    int64  `json:"total_bytes"`
	OmittedBefore int64  `json:"omitted_before"`
	OmittedAfter  int64  `json:"omitted_after"`
	Skipped       int64  `json:"skipped"`
	SkippedFrom   int64  `json:"skipped_from"`
}

// checkPageOf fails unless p describes exactly its text within full (the
// job's whole output), and paging to it by byte and by line gives it back.
func checkPageOf(t *testing.T, w *world, id, what string, p page, full string, maxChars int) {
	t.Helper()
	if p.Text == "" {
		t.Fatalf("%s: no text", what)
	}
	if n := utf8.RuneCountInString(p.Text); n > maxChars {
		t.Errorf("%s: %d characters, more than %d", what, n, maxChars)
	}
	if p.Start < 0 || p.End > int64(len(full)) || p.End-p.Start != int64(len(p.Text)) || full[p.Start:p.End] != p.Text {
		t.Errorf("%s: start %d end %d do not hold its %d bytes of text", what, p.Start, p.End, len(p.Text))
		return
	}
	if p.OmittedBefore != p.Start || p.OmittedAfter != int64(len(full))-p.End || p.NextOffset != p.End {
		t.Errorf("%s: omitted_before %d, omitted_after %d, next_offset %d; want %d, %d, %d",
			what, p.OmittedBefore, p.OmittedAfter, p.NextOffset, p.Start, int64(len(full))-p.End, p.End)
	}
	if want := int64(strings.Count(full[:p.Start], "\n")) + 1; p.FirstLine != want {
		t.Errorf("%s: first_line %d, want %d (the line of byte %d)", what, p.FirstLine, want, p.Start)
	}
	if want := int64(strings.Count(p.Text, "\n")); p.Lines != want {
		t.Errorf("%s: lines %d, want %d", what, p.Lines, want)
	}
	if p.Start > 0 && full[p.Start-1] != '\n' {
		t.Errorf("%s: starts inside line %d (at byte %d), not at a line", what, p.FirstLine, p.Start)
	}
	var byByte, byLine page
	mustJSON(t, w.ok("--json", "log", id, "--offset", fmt.Sprint(p.Start), "--limit", fmt.Sprint(p.End-p.Start)), &byByte)
	if byByte.Text != p.Text {
		t.Errorf("%s: log --offset %d --limit %d gives %d other bytes", what, p.Start, p.End-p.Start, len(byByte.Text))
	}
	mustJSON(t, w.ok("--json", "log", id, "--from-line", fmt.Sprint(p.FirstLine), "--lines", fmt.Sprint(p.Lines)), &byLine)
	if byLine.Text != p.Text || byLine.Start != p.Start {
		t.Errorf("%s: log --from-line %d --lines %d starts at byte %d with %q…, not at %d with %q…",
			what, p.FirstLine, p.Lines, byLine.Start, cut(byLine.Text), p.Start, cut(p.Text))
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}

// TestPollTailDescribesItsText: `poll --tail N`, `poll --new` and their
// text form say where the text they return starts, on a log of about
// 100 KB.
func TestPollTailDescribesItsText(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const n = 2000
	full := variedLines(n)
	id := w.start(helper("varied-lines", strconv.Itoa(n))...)
	w.ok("wait", id)
	if got := w.ok("log", "--all", id); got != full {
		t.Fatalf("the log holds %d bytes, want %d", len(got), len(full))
	}
	t.Logf("log of %d bytes, %d lines", len(full), n)
	head := regexp.MustCompile(`earlier, before line (\d+) at byte (\d+)`)
	for _, tail := range []int{50, 500, 3000} {
		var p struct {
			Output page `json:"output"`
		}
		mustJSON(t, w.ok("--json", "poll", id, "--tail", strconv.Itoa(tail)), &p)
		what := fmt.Sprintf("poll --tail %d", tail)
		checkPageOf(t, w, id, what, p.Output, full, tail)

		text := w.ok("poll", id, "--tail", strconv.Itoa(tail))
		m := head.FindStringSubmatch(text)
		if m == nil || m[1] != fmt.Sprint(p.Output.FirstLine) || m[2] != fmt.Sprint(p.Output.Start) {
			t.Errorf("%s (text) does not say it starts at line %d, byte %d:\n%s", what, p.Output.FirstLine, p.Output.Start, text)
		}
		if !strings.HasSuffix(text, "---\n"+p.Output.Text) {
			t.Errorf("%s (text) does not end in the text of its JSON", what)
		}
	}

	var p struct {
		Output page `json:"output"`
	}
	mustJSON(t, w.ok("--json", "poll", id, "--new", "--tail", "700"), &p)
	checkPageOf(t, w, id, "poll --new --tail 700", p.Output, full, 700)
	if p.Output.SkippedFrom != 0 || p.Output.Skipped != p.Output.Start {
		t.Errorf("poll --new --tail 700: skipped %d from %d, want %d from 0", p.Output.Skipped, p.Output.SkippedFrom, p.Output.Start)
	}
	if r := w.jobs("log", id, "--offset", "0", "--limit", fmt.Sprint(p.Output.Skipped)); r.code != 0 || r.stdout != full[:p.Output.Skipped] {
		t.Errorf("poll --new: the skipped bytes are not those before its text")
	}
}

func init() {
	// lines-gate-lines N FILE M: lines 1…N, waits for FILE, lines N+1…N+M.
	helperModes["lines-gate-lines"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		m, _ := strconv.Atoi(args[2])
		for i := 1; i <= n; i++ {
			fmt.Printf("line %d\n", i)
		}
		for {
			if _, err := os.Stat(args[1]); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i := n + 1; i <= n+m; i++ {
			fmt.Printf("line %d\n", i)
		}
		return nil
	}
}

// TestPollTailAfterClear: a tail that reaches back to bytes `jobs clear`
// removed starts at the first stored byte and says where that is.
func TestPollTailAfterClear(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	gate := w.base + "/gate"
	id := w.start(helper("lines-gate-lines", "300", gate, "40")...)
	waitFor(t, 10*time.Second, "the first lines", func() bool {
		return strings.Contains(w.jobs("log", id).stdout, "line 300\n")
	})
	w.ok("clear", id)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.jobs("wait", id)
	cleared := int64(0)
	for i := 1; i <= 300; i++ {
		cleared += int64(len(fmt.Sprintf("line %d\n", i)))
	}
	var p struct {
		Output page `json:"output"`
	}
	mustJSON(t, w.ok("--json", "poll", id, "--tail", "2000"), &p)
	o := p.Output
	if o.Start != cleared || o.FirstLine != 301 || o.Lines != 40 || !strings.HasPrefix(o.Text, "line 301\n") {
		t.Errorf("poll --tail 2000 after a clear: start %d, first_line %d, lines %d, text %q…; want %d, 301, 40, \"line 301\\n…\"",
			o.Start, o.FirstLine, o.Lines, cut(o.Text), cleared)
	}
	var byByte page
	mustJSON(t, w.ok("--json", "log", id, "--offset", fmt.Sprint(o.Start), "--limit", fmt.Sprint(o.End-o.Start)), &byByte)
	if byByte.Text != o.Text {
		t.Errorf("log --offset %d gives other bytes than the poll's text", o.Start)
	}
}
