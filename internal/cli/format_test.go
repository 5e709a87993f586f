package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {850 * time.Millisecond, "850ms"}, {3200 * time.Millisecond, "3.2s"},
		{42 * time.Second, "42s"}, {245 * time.Second, "4m05s"}, {2*time.Hour + 3*time.Minute, "2h03m"},
		{76 * time.Hour, "3d04h"},
	} {
		if got := formatDuration(tc.d); got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestFormatAge(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "just now"}, {3 * time.Second, "3s ago"}, {5 * time.Minute, "5m ago"},
		{2 * time.Hour, "2h ago"}, {100 * time.Hour, "4d ago"},
	} {
		if got := formatAge(now, now.Add(-tc.ago)); got != tc.want {
			t.Errorf("formatAge(-%v) = %q, want %q", tc.ago, got, tc.want)
		}
	}
}

func intp(n int) *int { return &n }

func TestJobExitCode(t *testing.T) {
	started := time.Now()
	for _, tc := range []struct {
		name string
		job  jobs.Job
		want int
	}{
		{"running", jobs.Job{Status: jobs.StatusRunning}, 0},
		{"done", jobs.Job{Status: jobs.StatusDone, ExitCode: intp(0)}, 0},
		{"failed", jobs.Job{Status: jobs.StatusFailed, ExitCode: intp(3), StartedAt: &started}, 3},
		{"signal", jobs.Job{Status: jobs.StatusFailed, Signal: "SEGV", StartedAt: &started}, 139},
		{"killed", jobs.Job{Status: jobs.StatusKilled, Signal: "TERM", StartedAt: &started}, 143},
		{"killed without detail", jobs.Job{Status: jobs.StatusKilled, StartedAt: &started}, 137},
		{"not started", jobs.Job{Status: jobs.StatusFailed, Reason: "exec: nope: not found"}, 127},
		{"lost", jobs.Job{Status: jobs.StatusLost, StartedAt: &started}, 1},
		{"zero exit but failed", jobs.Job{Status: jobs.StatusKilled, ExitCode: intp(0), StartedAt: &started}, 1},
	} {
		if got := jobExitCode(tc.job); got != tc.want {
			t.Errorf("%s: jobExitCode = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestWaitExitCode(t *testing.T) {
	started := time.Now()
	a := jobs.Job{ID: "a", Status: jobs.StatusDone, ExitCode: intp(0), StartedAt: &started}
	b := jobs.Job{ID: "b", Status: jobs.StatusFailed, ExitCode: intp(4), StartedAt: &started}
	r := jobs.Job{ID: "r", Status: jobs.StatusRunning, StartedAt: &started}
	for _, tc := range []struct {
		name string
		res  jobs.WaitResult
		o    jobs.WaitOptions
		want int
	}{
		{"all done", jobs.WaitResult{Reason: jobs.WaitExited, Jobs: []jobs.Job{a}}, jobs.WaitOptions{}, 0},
		{"first non-zero", jobs.WaitResult{Reason: jobs.WaitExited, Jobs: []jobs.Job{a, b}}, jobs.WaitOptions{}, 4},
		// The engine names the job that ended last; without --any that
		// says nothing about the exit status.
		{"first non-zero, last ender named", jobs.WaitResult{Reason: jobs.WaitExited, JobID: "a", Jobs: []jobs.Job{b, a}}, jobs.WaitOptions{}, 4},
		{"any picks the ender", jobs.WaitResult{Reason: jobs.WaitExited, JobID: "a", Jobs: []jobs.Job{b, a}}, jobs.WaitOptions{Any: true}, 0},
		{"timeout", jobs.WaitResult{Reason: jobs.WaitTimedOut, Jobs: []jobs.Job{r}}, jobs.WaitOptions{}, ExitTimedOut},
		{"matched", jobs.WaitResult{Reason: jobs.WaitMatched, JobID: "r", Jobs: []jobs.Job{r}}, jobs.WaitOptions{Until: "x"}, 0},
		{"idle", jobs.WaitResult{Reason: jobs.WaitIdle, JobID: "r", Jobs: []jobs.Job{r}}, jobs.WaitOptions{Idle: time.Second}, 0},
		{"ended before the match", jobs.WaitResult{Reason: jobs.WaitExited, JobID: "a", Jobs: []jobs.Job{a}}, jobs.WaitOptions{Until: "x"}, ExitNotHappened},
		{"ended before going quiet", jobs.WaitResult{Reason: jobs.WaitExited, JobID: "b", Jobs: []jobs.Job{b}}, jobs.WaitOptions{Idle: time.Second}, ExitNotHappened},
	} {
		if got := waitExitCode(tc.res, tc.o); got != tc.want {
			t.Errorf("%s: waitExitCode = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestReorder(t *testing.T) {
	r := &runner{}
	cmds := r.commands()
	for _, tc := range []struct {
		in       string
		want     string
		dashArgs []string
	}{
		{"jobs poll ID --tail 9 --json", "jobs --json poll --tail 9 -- ID", nil},
		{"jobs --scope s log ID -f --stream=stderr", "jobs --scope s log -f --stream=stderr -- ID", nil},
		{"jobs start --name w -- make -j 4", "jobs start --name w -- make -j 4", []string{"make", "-j", "4"}},
		{"jobs start 'sleep 1' --wait", "jobs start --wait -- 'sleep 1'", nil},
		{"jobs write ID - --eof", "jobs write --eof -- ID -", nil},
		{"jobs list", "jobs list", nil},
		{"jobs help start", "jobs help start", nil},
		{"jobs frob --x", "jobs frob --x", nil},
		{"jobs --db x.db supervise --idle 5s", "jobs --db x.db supervise --idle 5s", nil},
		{"jobs kill ID --db=x --signal INT", "jobs --db=x kill --signal INT -- ID", nil},
	} {
		got := reorder(cmds, splitWords(tc.in))
		if g := strings.Join(got.args, " "); g != tc.want {
			t.Errorf("reorder(%s)\n got  %s\n want %s", tc.in, g, tc.want)
		}
		if fmt.Sprint(got.dashArgs) != fmt.Sprint(tc.dashArgs) {
			t.Errorf("reorder(%s): dashArgs %q, want %q", tc.in, got.dashArgs, tc.dashArgs)
		}
	}
}

// splitWords splits on spaces, keeping 'quoted words' together (quotes
// kept, which is enough to compare).
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(out, cur.String())
}

func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		line string
		code int
	}{
		{usagef("poll", "missing job id or name"), "jobs: missing job id or name (run 'jobs help poll')", 2},
		{fmt.Errorf("job 7fq2: %w", jobs.ErrNotFound), "jobs: job 7fq2: not found ('jobs list' shows this scope's jobs)", 1},
		{errors.New("two\nlines"), "jobs: two; lines", 1},
		{&exitError{code: 3}, "", 3},
		{fmt.Errorf("bad regex: %w", jobs.ErrInvalid), "jobs: bad regex: invalid argument", 2},
		{rewriteFlagError("log", errors.New("flag provided but not defined: -x"), nil), "jobs: unknown flag -x (run 'jobs help log')", 2},
		{rewriteFlagError("log", errors.New("flag provided but not defined: -bogus"), nil), "jobs: unknown flag --bogus (run 'jobs help log')", 2},
		{rewriteFlagError("log", errors.New(`invalid value "q" for flag -tail: parse error`), nil), `jobs: invalid value "q" for --tail (run 'jobs help log')`, 2},
	} {
		line, code := errorLine(tc.err)
		if line != tc.line || code != tc.code {
			t.Errorf("errorLine(%v) = %q, %d; want %q, %d", tc.err, line, code, tc.line, tc.code)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]string{"int": "INT", "SIGTERM": "TERM", "9": "KILL", "usr1": "USR1", " cont ": "CONT"} {
		got, err := parseSignal("kill", in)
		if err != nil || got != want {
			t.Errorf("parseSignal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "FOO", "SIG", "99"} {
		if _, err := parseSignal("kill", in); err == nil {
			t.Errorf("parseSignal(%q) succeeded", in)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"ls": "ls", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "--x=1": "--x=1"} {
		if got := textclean.ShellQuote(in); got != want {
			t.Errorf("textclean.ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	var tb table
	tb.add("a", "bb", "c")
	tb.add("\x1b[31mlong\x1b[0m", "b", "c")
	want := "a     bb  c\n\x1b[31mlong\x1b[0m  b   c\n"
	if got := tb.render(); got != want {
		t.Errorf("render = %q, want %q", got, want)
	}
}

// Fixed jobs for the golden files.
var (
	goldenNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
)

func goldenJobs() []jobs.Job {
	at := func(ago time.Duration) *time.Time { t := goldenNow.Add(-ago); return &t }
	return []jobs.Job{
		{
			ID: "k3v9q2m4x7b1a", Scope: "default", Name: "devserver", Command: "npm run dev", Mode: jobs.ModePipe,
			Status: jobs.StatusRunning, PID: 4242, PGID: 4242, Stdin: "pipe", Cwd: "/src/app",
			CreatedAt: *at(5 * time.Minute), StartedAt: at(5 * time.Minute), LastAccess: *at(time.Minute),
			Runtime: 5 * time.Minute, Timeout: 30 * time.Minute, TTL: 30 * time.Minute, MaxOutput: 64 << 20,
			OutputBytes: 1258291, OutputLines: 3000, LastOutputAt: at(3 * time.Second), Supervisor: "s7d2k1",
		},
		{
			ID: "p0w8e6r5t4y3u", Scope: "default", Label: "tests", Argv: []string{"go", "test", "./..."}, Mode: jobs.ModePipe,
			Status: jobs.StatusFailed, ExitCode: intp(1), PID: 4100, PGID: 4100, Stdin: "closed", Cwd: "/src/app",
			CreatedAt: *at(20 * time.Minute), StartedAt: at(20 * time.Minute), EndedAt: at(18 * time.Minute),
			LastAccess: *at(18 * time.Minute), Runtime: 2*time.Minute + 5*time.Second, Timeout: 30 * time.Minute,
			TTL: 30 * time.Minute, MaxOutput: 64 << 20, OutputBytes: 5321, OutputLines: 80, LastOutputAt: at(18 * time.Minute),
			UserCPU: 41 * time.Second, SysCPU: 3 * time.Second, MaxRSSKB: 204800,
		},
		{
			ID: "z9x8c7v6b5n4m", Scope: "default", Command: "read -p 'Continue? ' x && echo yes", Mode: jobs.ModePipe,
			Status: jobs.StatusRunning, PID: 4300, PGID: 4300, Stdin: "pipe", WaitingForInput: true,
			CreatedAt: *at(10 * time.Second), StartedAt: at(10 * time.Second), LastAccess: *at(10 * time.Second),
			Runtime: 10 * time.Second, OutputBytes: 10, OutputLines: 0, LastOutputAt: at(9 * time.Second),
		},
		{
			ID: "l1o2s3t4j5o6b", Scope: "default", Command: "sleep 999 & sleep 999", Mode: jobs.ModePipe,
			Status: jobs.StatusLost, Descendants: 2, Reason: "supervisor s7d2k0 died",
			CreatedAt: *at(3 * time.Hour), StartedAt: at(3 * time.Hour), EndedAt: at(time.Hour), LastAccess: *at(time.Hour),
			Runtime: 2 * time.Hour,
		},
	}
}

func TestGoldenList(t *testing.T) {
	js := goldenJobs()
	items := make([]listItem, len(js))
	for i, j := range js {
		items[i].Job = j
	}
	golden(t, "list.golden", formatList(items, goldenNow, painter{}, false, false, 30))
	tail := "Local: http://localhost:5173/\nready in 300 ms\n"
	items[0].Tail = &tail
	golden(t, "list_tail_scopes.golden", formatList(items[:2], goldenNow, painter{}, true, false, 0))
}

func TestGoldenPoll(t *testing.T) {
	js := goldenJobs()
	golden(t, "poll_running.golden", formatPoll(jobs.PollResult{
		Job: js[0],
		Output: jobs.Output{JobID: js[0].ID, Text: "ready in 300 ms\n", Start: 1258275, End: 1258291,
			NextOffset: 1258291, FirstLine: 3000, Lines: 1, TotalBytes: 1258291, TotalLines: 3000, OmittedBefore: 1258275},
	}, goldenNow, painter{}, false))
	golden(t, "poll_failed.golden", formatPoll(jobs.PollResult{
		Job:    js[1],
		Output: jobs.Output{JobID: js[1].ID, Text: "--- FAIL: TestX (0.00s)\nFAIL", Start: 0, End: 5321, TotalBytes: 5321},
	}, goldenNow, painter{}, false))
	golden(t, "poll_input.golden", formatPoll(jobs.PollResult{
		Job:    js[2],
		Output: jobs.Output{JobID: js[2].ID, Text: "Continue? ", Start: 0, End: 10, TotalBytes: 10},
	}, goldenNow, painter{}, true))
}

func TestGoldenStatus(t *testing.T) {
	t.Setenv("TZ", "UTC")
	time.Local = time.UTC
	j := goldenJobs()[1]
	at := func(ago time.Duration) time.Time { return goldenNow.Add(-ago) }
	evs := []jobs.Event{
		{ID: 1, JobID: j.ID, At: at(20 * time.Minute), Kind: "transition", To: jobs.StatusStarting},
		{ID: 2, JobID: j.ID, At: at(20 * time.Minute), Kind: "transition", From: jobs.StatusStarting, To: jobs.StatusRunning, Detail: []byte(`{"pid":4100}`)},
		{ID: 7, JobID: j.ID, At: at(18 * time.Minute), Kind: "transition", From: jobs.StatusRunning, To: jobs.StatusFailed, Detail: []byte(`{"exit_code":1,"reason":"exit status 1"}`)},
	}
	golden(t, "status.golden", formatStatus(j, evs, goldenNow, painter{}))
}

func TestGoldenWait(t *testing.T) {
	js := goldenJobs()
	golden(t, "wait_exited.golden", formatWait(jobs.WaitResult{Reason: jobs.WaitExited, Jobs: []jobs.Job{js[1]}}, jobs.WaitOptions{}))
	golden(t, "wait_timeout.golden", formatWait(jobs.WaitResult{Reason: jobs.WaitTimedOut, Jobs: []jobs.Job{js[0], js[1]}}, jobs.WaitOptions{}))
	golden(t, "wait_matched.golden", formatWait(jobs.WaitResult{Reason: jobs.WaitMatched, JobID: js[0].ID, Match: "Local: http://localhost:5173/", Jobs: []jobs.Job{js[0]}}, jobs.WaitOptions{}))
	golden(t, "wait_unmatched.golden", formatWait(jobs.WaitResult{Reason: jobs.WaitExited, Jobs: []jobs.Job{js[1]}}, jobs.WaitOptions{Until: "Local:"}))
}

func TestAmbiguousHint(t *testing.T) {
	line, code := errorLine(fmt.Errorf("id prefix 7fq2 matches 7fq2a, 7fq2b: %w", jobs.ErrAmbiguous))
	if code != 1 || !strings.Contains(line, "use more characters of the id") {
		t.Errorf("errorLine = %q, %d", line, code)
	}
}

func TestExitErrorLine(t *testing.T) {
	line, code := errorLine(&exitError{code: 143, msg: "job x timed_out (signal TERM) after 1s"})
	if line != "jobs: job x timed_out (signal TERM) after 1s" || code != 143 {
		t.Errorf("errorLine = %q, %d", line, code)
	}
}

func TestLiveLine(t *testing.T) {
	var b strings.Builder
	l := &liveLine{w: &b, start: time.Now(), lastLine: func(string) string { return "compiling foo" }}
	l.update([]jobs.Job{{ID: "a", Status: jobs.StatusRunning, OutputBytes: 2048}})
	l.clear()
	got := b.String()
	if !strings.HasPrefix(got, "\r\x1b[Kwaiting 0s · 1 of 1 running · 2 KiB output · compiling foo") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("live line = %q", got)
	}
	var nilLine *liveLine
	nilLine.update(nil) // no terminal: no line
	nilLine.clear()
}
