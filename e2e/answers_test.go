package e2e

// Wrong answers outside the busy paths: each test runs the built binary as
// a user would and checks that the answer is right.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func init() {
	// paint-then-wait FILE: prints a coloured line, waits for FILE to
	// exist, prints another coloured line and a redrawn one, exits.
	helperModes["paint-then-wait"] = func(args []string) error {
		fmt.Print("\x1b[31mfirst\x1b[0m\n")
		for {
			if _, err := os.Stat(args[0]); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Print("\x1b[32msecond\x1b[0m\nabc\rX\x1b[K\n")
		return nil
	}
}

// TestFollowCleanCleansEveryPage: `log -f --clean` cleans what arrives
// after the first page too.
func TestFollowCleanCleansEveryPage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	gate := w.base + "/gate"
	id := w.start(helper("paint-then-wait", gate)...)
	waitFor(t, 10*time.Second, "the first line", func() bool {
		return strings.Contains(w.ok("log", id), "first")
	})
	c := w.cmd("log", "-f", "--clean", id)
	var out lockedBuffer
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to print the first page", func() bool {
		return strings.Contains(out.String(), "first")
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("log -f: %v", err)
	}
	if got, want := out.String(), "first\nsecond\nX\n"; got != want {
		t.Errorf("log -f --clean printed %q, want %q", got, want)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("log -f --clean: %d escape bytes after the first page", strings.Count(out.String(), "\x1b")))
}

// TestWriteEOFJobEndsAfterData: `write ID DATA --eof` succeeds when the
// job ends as soon as it has taken the data, before the close arrives.
func TestWriteEOFJobEndsAfterData(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const runs = 5
	for i := 0; i < runs; i++ {
		id := w.start("head -c 3")
		r := w.jobs("--json", "write", id, "hi\n", "--eof")
		if r.code != 0 {
			t.Fatalf("run %d: %v", i, r)
		}
		var res struct {
			Bytes int  `json:"bytes"`
			EOF   bool `json:"eof"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, r.stdout)
		}
		if res.Bytes != 3 || !res.EOF {
			t.Fatalf("run %d: wrote %d bytes, eof %v; want 3 and true", i, res.Bytes, res.EOF)
		}
		w.ok("wait", id)
		if got := w.ok("log", id); got != "hi\n" {
			t.Fatalf("run %d: the job read %q, want %q", i, got, "hi\n")
		}
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d of %d writes with --eof to a job that ends on its input exited 0", runs, runs))
}

// TestKillReadsTheSameInTmuxAndPipeMode: one kill, one wording.
func TestKillReadsTheSameInTmuxAndPipeMode(t *testing.T) {
	t.Parallel()
	w, _ := tmuxWorld(t)
	var texts []string
	for _, mode := range [][]string{nil, {"--tmux"}} {
		id := w.start(append(mode, "echo ready; sleep 60")...)
		waitFor(t, 10*time.Second, "the job to start", func() bool {
			return strings.Contains(w.ok("log", id), "ready")
		})
		w.ok("kill", id)
		j, _ := w.status(id)
		if j.Status != "killed" || j.Signal != "TERM" {
			t.Errorf("%v: status %s signal %q, want killed by TERM", mode, j.Status, j.Signal)
		}
		texts = append(texts, statusLine(t, w, id))
	}
	if texts[0] != texts[1] || !strings.Contains(texts[0], "killed (signal TERM)") {
		t.Errorf("status reads %q in pipe mode and %q in tmux mode, want both \"killed (signal TERM)\"", texts[0], texts[1])
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("pipe: %q, tmux: %q", texts[0], texts[1]))
}

// statusLine is the status line of `jobs status ID`.
func statusLine(t *testing.T, w *world, id string) string {
	t.Helper()
	for _, l := range strings.Split(w.ok("status", id), "\n") {
		if strings.HasPrefix(l, "status ") {
			return strings.TrimSpace(strings.TrimPrefix(l, "status"))
		}
	}
	t.Fatalf("no status line for %s", id)
	return ""
}

// TestMainExitedSaidInText: a job whose main process exited while a child
// holds its output says so in list, status and poll, not only in JSON.
func TestMainExitedSaidInText(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// The state lasts while the supervisor waits for the pipes the
	// grandchild holds (2 s by default): long enough here that a loaded
	// machine still reads it.
	w.extra = append(w.extra, "JOBS_DRAIN_TIMEOUT=5m")
	// The grandchild outlives the test, which kills it: with sleep 30,
	// a CI run whose commands were slow read the job after it had ended.
	id := w.start("sleep 600 & echo started")
	t.Cleanup(func() { _ = w.cmd("kill", id).Run() })
	var j struct {
		Job struct {
			PID         int  `json:"pid"`
			Descendants int  `json:"descendants"`
			MainExited  bool `json:"main_exited"`
		} `json:"job"`
	}
	// The supervisor says so once it has reaped the main process: its
	// pid being gone comes first, and a poll between the two still reads
	// main_exited false (seen on a busy machine).
	waitFor(t, time.Minute, "the supervisor to record the main process's exit", func() bool {
		if err := json.Unmarshal([]byte(w.ok("--json", "poll", id)), &j); err != nil {
			t.Fatal(err)
		}
		return j.Job.MainExited
	})
	if !j.Job.MainExited || j.Job.Descendants != 1 {
		t.Errorf("poll --json: main_exited %v, descendants %d; want true and 1", j.Job.MainExited, j.Job.Descendants)
	}
	const want = "running (main process exited, 1 process left)"
	pid := fmt.Sprint(j.Job.PID)
	for _, args := range [][]string{{"list"}, {"status", id}, {"poll", id}} {
		out := w.ok(args...)
		if !strings.Contains(out, want) {
			t.Errorf("jobs %s does not say %q:\n%s", strings.Join(args, " "), want, out)
		}
		shown := strings.Contains(out, " "+pid+" ")
		if args[0] == "status" {
			shown = !strings.Contains(out, pid+", exited") && !strings.Contains(out, "), exited")
		}
		if shown {
			t.Errorf("jobs %s shows the exited pid %s as the job's running pid:\n%s", strings.Join(args, " "), pid, out)
		}
	}
	w.ok("kill", id)
	t.Logf("MATRIX-FIGURE %s", "status reads \""+want+"\" in list, status and poll")
}

// TestHookOutputKept: an exit hook's own output is stored in its event.
func TestHookOutputKept(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--on-exit", `echo "hook saw $JOBS_STATUS"; echo "to stderr" >&2`, "true")
	w.ok("wait", id)
	var detail map[string]any
	waitFor(t, 10*time.Second, "the hook's event", func() bool {
		_, events := w.status(id)
		for _, e := range events {
			if e.Kind != "hook" {
				continue
			}
			var d map[string]any
			if err := json.Unmarshal(e.Detail, &d); err == nil && d["state"] == "finished" {
				detail = d
				return true
			}
		}
		return false
	})
	if got, want := detail["output"], "hook saw done\nto stderr"; got != want {
		t.Errorf("hook event output = %q, want %q (detail %v)", got, want, detail)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("hook event detail output %q", detail["output"]))
}

// TestKillSparesTheJobsHook: a job killed while one of its processes
// ignores SIGTERM ends when its main process exits, and its on_exit hook
// starts then, while the kill still waits out its grace to SIGKILL what
// is left of the job. The hook sees the job's JOBS_ID, the tag by which
// kill finds the job's escaped processes; it must not be taken for one of
// them. (The hook was SIGKILLed within 20 ms before it was marked.)
func TestKillSparesTheJobsHook(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	marker := filepath.Join(w.base, "hook-ran")
	id := w.start("--on-exit", "sleep 3; echo ran > "+marker, "--",
		"sh", "-c", `sh -c 'trap "" TERM; exec sleep 300' & echo up; wait`)
	w.waitOutput(id, "up")
	w.ok("kill", "--grace", "2s", id)
	var detail map[string]any
	waitFor(t, time.Minute, "the hook's end", func() bool {
		_, events := w.status(id)
		for _, e := range events {
			var d map[string]any
			if e.Kind == "hook" && json.Unmarshal(e.Detail, &d) == nil && d["state"] == "finished" {
				detail = d
				return true
			}
		}
		return false
	})
	if detail["ok"] != true {
		t.Errorf("the hook of the killed job did not finish ok: %v", detail)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
		t.Errorf("the hook's file: %q, %v", b, err)
	}
}

func init() {
	// alternate N GAP: N pairs of lines, "oI" on stdout then "eI" on
	// stderr, each write GAP after the reader took the one before.
	helperModes["alternate"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		gap, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			fmt.Fprintf(os.Stdout, "o%d\n", i)
			drained(os.Stdout)
			time.Sleep(gap)
			fmt.Fprintf(os.Stderr, "e%d\n", i)
			drained(os.Stderr)
			time.Sleep(gap)
		}
		return nil
	}
}

// drained waits, for at most a minute, until the pipe f writes to is
// empty: its reader has taken what was written. Of two pipes, a reader
// that is kept off the CPU (the machine is shared) finds the writes of
// both waiting and cannot know their order; waiting for it makes the
// order of the writes one the reader can see. On what is not a pipe
// (FIONREAD fails) it returns at once.
func drained(f *os.File) {
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Millisecond) {
		var n int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 || n == 0 {
			return
		}
	}
}

var lineTokenRE = regexp.MustCompile(`(?m)^[oe][0-9]+$`)

// disorder returns how many o/e lines in text were read before a line
// written earlier (the written order is o1 e1 o2 e2 …), and how many
// there are; text may start anywhere in the sequence.
func disorder(text string) (bad, n int) {
	got := lineTokenRE.FindAllString(text, -1)
	rank := make([]int, len(got))
	for i, tok := range got {
		k, _ := strconv.Atoi(tok[1:])
		rank[i] = 2 * k
		if tok[0] == 'e' {
			rank[i]++
		}
	}
	low := int(^uint(0) >> 1)
	for i := len(rank) - 1; i >= 0; i-- {
		if rank[i] > low {
			bad++
		}
		low = min(low, rank[i])
	}
	return bad, len(got)
}

// TestCombinedReadKeepsOrder: stdout and stderr lines written 5 ms apart
// come back in the order written from every combined read.
func TestCombinedReadKeepsOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pairs := int(envInt64("JOBS_E2E_ORDER_PAIRS", 100))
	const gap = "5ms"
	id := w.start(helper("alternate", strconv.Itoa(pairs), gap)...)
	follow := w.cmd("log", "-f", "--offset", "0", id)
	var followed lockedBuffer
	follow.Stdout = &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	w.ok("wait", id)
	if err := follow.Wait(); err != nil {
		t.Fatalf("log -f: %v", err)
	}
	cs := w.mcp()
	reads := []struct{ what, text string }{
		{"log", w.ok("log", "--offset", "0", id)},
		{"log --from-line", w.ok("log", "--from-line", "1", "--lines", strconv.Itoa(2*pairs), id)},
		{"log -f", followed.String()},
		{"poll", w.ok("poll", id)},
	}
	text, isErr := mcpCall(t, cs, "process", map[string]any{"action": "log", "sessionId": id, "unit": "lines", "offset": 0, "limit": 2 * pairs})
	if isErr {
		t.Fatalf("mcp log: %s", text)
	}
	_, body, _ := strings.Cut(text, "\n") // a summary line, then the output as text
	reads = append(reads, struct{ what, text string }{"mcp log", body})
	worst := 0
	var first string
	for _, r := range reads {
		bad, n := disorder(r.text)
		if n == 0 || r.what != "poll" && n != 2*pairs {
			t.Errorf("%s read %d lines, want %d:\n%s", r.what, n, 2*pairs, r.text)
		}
		if bad > 0 && first == "" {
			first = r.what + ": " + strings.Join(lineTokenRE.FindAllString(r.text, -1), " ")
		}
		worst = max(worst, bad)
	}
	// Each line is written once the one before has left its pipe (see
	// drained), so a supervisor off the CPU no longer finds writes of
	// both pipes waiting. What can still swap two lines is a pump
	// descheduled between its read and the append: allow that, rarely,
	// but not the order lost on every flush.
	if worst > 2*pairs/10 {
		t.Errorf("%d of %d lines read out of order; first read with a line out of order: %s", worst, 2*pairs, first)
	} else if first != "" {
		t.Logf("read out of order (within the bound): %s", first)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d of %d stdout/stderr lines written %s apart read out of order (log, log --from-line, log -f, poll, MCP)", worst, 2*pairs, gap))
}

// argvHolding returns the processes whose command line contains s.
func argvHolding(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestEnvValueNeverInArgv: an --env value reaches the job's environment
// and no process's command line, in pipe and tmux mode.
func TestEnvValueNeverInArgv(t *testing.T) {
	t.Parallel()
	w, _ := tmuxWorld(t)
	secret := fmt.Sprintf("sekrit-%d-%d", os.Getpid(), time.Now().UnixNano())
	scanned, found := 0, 0
	for _, mode := range [][]string{nil, {"--tmux"}} {
		args := append(append([]string{"--env", "API_KEY=" + secret}, mode...), `echo "len=${#API_KEY}"; sleep 60`)
		id := w.start(args...)
		waitFor(t, 10*time.Second, "the job to print", func() bool { return strings.Contains(w.ok("log", id), "len=") })
		if got, want := strings.TrimSpace(w.ok("log", id)), fmt.Sprintf("len=%d", len(secret)); got != want {
			t.Errorf("%v: the job saw %q, want %q", mode, got, want)
		}
		ps := argvHolding(secret)
		found += len(ps)
		if len(ps) > 0 {
			t.Errorf("%v: the --env value is in the command line of: %s", mode, strings.Join(ps, "; "))
		}
		scanned++
		w.ok("kill", id)
	}
	// --env KEY passes this environment's value, so that it is not on
	// the jobs command line either.
	c := w.cmd("start", "--env", "API_KEY", `echo "len=${#API_KEY}"`)
	c.Env = append(c.Env, "API_KEY="+secret)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("start --env API_KEY: %v", err)
	}
	id := strings.TrimSpace(string(out))
	w.ok("wait", id)
	if got, want := strings.TrimSpace(w.ok("log", id)), fmt.Sprintf("len=%d", len(secret)); got != want {
		t.Errorf("--env KEY: the job saw %q, want %q", got, want)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("--env value found in %d process command lines (pipe and tmux mode, %d scans of /proc/*/cmdline while the job ran)", found, scanned))
}

// TestTmuxSocketRecordedWithJob: a tmux job stays on the tmux server it
// started on, and capture, attach and kill find it there from a shell
// whose JOBS_TMUX_SOCKET differs.
func TestTmuxSocketRecordedWithJob(t *testing.T) {
	t.Parallel()
	w, sock := tmuxWorld(t) // every command of w has JOBS_TMUX_SOCKET=sock
	id := w.start("--tmux", "echo marker-on-private; sleep 60")
	waitFor(t, time.Minute, "the job's output", func() bool { return strings.Contains(w.ok("log", id), "marker-on-private") })
	if err := exec.Command("tmux", "-L", sock, "has-session", "-t", "=jobs-"+id).Run(); err != nil {
		t.Fatalf("the job's session is not on its server %s: %v", sock, err)
	}
	// Another shell: no JOBS_TMUX_SOCKET (tmux's default server).
	other := *w
	other.extra = slices.DeleteFunc(slices.Clone(w.extra), func(kv string) bool { return strings.HasPrefix(kv, "JOBS_TMUX_SOCKET=") })
	found := 0
	if r := other.jobs("capture", id); r.code != 0 || !strings.Contains(r.stdout, "marker-on-private") {
		t.Errorf("capture from another shell: %v", r)
	} else {
		found++
	}
	if r := other.jobs("--json", "attach", id); r.code != 0 || !strings.Contains(r.stdout, sock) {
		t.Errorf("attach from another shell does not name the job's server %s: %v", sock, r)
	} else {
		found++
	}
	if r := other.jobs("kill", id); r.code != 0 {
		t.Errorf("kill from another shell: %v", r)
	}
	if j, _ := w.status(id); j.Status != "killed" {
		t.Errorf("after kill from another shell the job is %s, want killed", j.Status)
	} else {
		found++
	}
	if exec.Command("tmux", "-L", sock, "has-session", "-t", "=jobs-"+id).Run() == nil {
		t.Errorf("the job's session still runs on %s after the kill", sock)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d of 3 (capture, attach, kill) from a shell without JOBS_TMUX_SOCKET reached the job's recorded server", found))
}

// cpuTicks is the user+system CPU time of pid in clock ticks (1/100 s).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return u + k
}

// TestWaitSleepsThroughAnotherJobsFlood: a wait on a quiet job wakes when
// a status changes, not on every write of another job's output.
func TestWaitSleepsThroughAnotherJobsFlood(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	window := time.Duration(envInt64("JOBS_E2E_WAIT_WINDOW_MS", 6000)) * time.Millisecond
	quiet := w.start("sleep 600")
	flood := w.start(append([]string{"--max-output", "4MiB"}, helper("flood", strconv.FormatInt(1<<40, 10))...)...)
	defer w.jobs("kill", flood)
	waiter := w.cmd("wait", quiet)
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- waiter.Wait() }()
	// Past the first second, in which a wait looks every few milliseconds
	// (a job that ends at once is seen at once).
	time.Sleep(1500 * time.Millisecond) // let the wait settle into its long sleep
	before, out0 := cpuTicks(t, waiter.Process.Pid), w.poll(flood).OutputBytes
	t0 := time.Now()
	time.Sleep(window) // the measured stretch: the wait's CPU over it
	used, wall, out1 := cpuTicks(t, waiter.Process.Pid)-before, time.Since(t0), w.poll(flood).OutputBytes
	if out1 <= out0 {
		t.Fatalf("the flood did not write during the window (%d → %d bytes)", out0, out1)
	}
	perMinute := time.Duration(float64(used*10*int64(time.Millisecond)) * float64(time.Minute) / float64(wall))
	// The CPU is a figure, not a bound (a loaded machine moves it): that
	// the wait sleeps through the flood is asserted by counting its looks
	// at the database (pkg/jobs TestFollowersSleepThroughAFlood,
	// TestIdleWaitLooksRarely); here, that it still wakes for its job.
	w.ok("kill", quiet)
	select {
	case err := <-done:
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("wait: %v", err)
			}
		}
	case <-time.After(patience):
		waiter.Process.Kill()
		t.Fatal("wait did not return after its job was killed")
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("jobs wait on a quiet job: %d ms CPU in %v (%v a minute) while another job wrote %d MiB", used*10, wall.Round(time.Millisecond), perMinute.Round(time.Millisecond), (out1-out0)>>20))
}

// TestStreamLinesCountThatStream: a line selection with --stream counts
// the lines of that stream (from 1 in the CLI and its JSON, from 0 as an
// MCP offset), in every front end.
func TestStreamLinesCountThatStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(helper("alternate", "10", "1ms")...)
	w.ok("wait", id)
	right := 0
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--stream", "stdout", "--from-line", "5", "--lines", "3"}, "o5\no6\no7\n"},
		{[]string{"--stream", "stderr", "--from-line", "1", "--lines", "2"}, "e1\ne2\n"},
		{[]string{"--stream", "stderr", "--from-line", "9"}, "e9\ne10\n"},
		{[]string{"--stream", "stdout", "--from-line", "2", "--lines", "4", "--grep", "o[34]"}, "o3\no4\n"},
	} {
		if r := w.jobs(append([]string{"log"}, append(c.args, id)...)...); r.code != 0 || r.stdout != c.want {
			t.Errorf("%v; want stdout %q", r, c.want)
		} else {
			right++
		}
	}
	var page struct {
		FirstLine  int64  `json:"first_line"`
		Lines      int64  `json:"lines"`
		TotalLines int64  `json:"total_lines"`
		Text       string `json:"output"`
	}
	if err := json.Unmarshal([]byte(w.ok("--json", "log", "--stream", "stdout", "--from-line", "5", "--lines", "3", id)), &page); err != nil {
		t.Fatal(err)
	}
	if page.FirstLine != 5 || page.Lines != 3 || page.TotalLines != 10 || page.Text != "o5\no6\no7\n" {
		t.Errorf("log --json --stream stdout --from-line 5 --lines 3: %+v, want first_line 5, lines 3, total_lines 10", page)
	} else {
		right++
	}
	text, isErr := mcpCall(t, w.mcp(), "process", map[string]any{"action": "log", "sessionId": id, "unit": "lines", "stream": "stdout", "offset": 4, "limit": 3})
	// The output is its own plain-text block after the summary line.
	if isErr || !strings.Contains(text, "\no5\no6\no7") || strings.Contains(text, "o8") || !strings.Contains(text, "lines 5-7 of 10") {
		t.Errorf("mcp log unit=lines stream=stdout offset=4 limit=3: %s", text)
	} else {
		right++
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d of 6 stream-filtered line reads (4 log, JSON, MCP) returned that stream's lines", right))
}

func init() {
	// touch-mib N: holds N MiB, every page written, then exits.
	helperModes["touch-mib"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println(len(b) >> 20)
		return nil
	}
}

// maxRSS returns max_rss_kb of a finished job as its JSON gives it.
func maxRSS(t *testing.T, w *world, id string) int64 {
	t.Helper()
	var s struct {
		Job struct {
			MaxRSSKB int64 `json:"max_rss_kb"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(w.ok("--json", "status", id)), &s); err != nil {
		t.Fatal(err)
	}
	return s.Job.MaxRSSKB
}

// TestMaxRSSIsTheJobs: a job's max RSS is never the supervisor's memory,
// which the kernel counts into a child spawned with vfork; a job that uses
// more than the supervisor shows its own peak.
func TestMaxRSSIsTheJobs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	small := w.start("true")
	w.ok("wait", small)
	big := w.start(helper("touch-mib", "256")...)
	w.ok("wait", big)
	sup, bigKB := maxRSS(t, w, small), maxRSS(t, w, big)
	if sup != 0 {
		t.Errorf("max rss of `true` reads %d KiB: the supervisor's memory, not the job's (want 0, unknown)", sup)
	}
	if bigKB < 256<<10 {
		t.Errorf("max rss of a job that touched 256 MiB reads %d KiB", bigKB)
	}
	if strings.Contains(w.ok("status", small), "max rss") {
		t.Errorf("status of `true` shows a max rss")
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("max rss: `true` %d KiB (not known, was the supervisor's), a job touching 256 MiB %d KiB", sup, bigKB))
}

// TestWaitExitCodes: `jobs wait A B` exits with the first non-zero status
// of the jobs in the order given, whichever ended last (`wait $build $lint
// && deploy` must not deploy after a failed build); with --any, the status
// of the job that ended; and --until or --idle that never happened because
// the job ended exit 125, not the 0 of a real match.
func TestWaitExitCodes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	failFast := w.start("--", "sh", "-c", "exit 3")
	w.waitTerminal(failFast, 30*time.Second)
	okLater := w.start("--", "sh", "-c", "sleep 0.2; echo done")
	if r := w.jobs("wait", failFast, okLater); r.code != 3 {
		t.Errorf("wait failed ok: exit %d, want 3 (the first non-zero)", r.code)
	}
	if r := w.jobs("wait", okLater, failFast); r.code != 3 {
		t.Errorf("wait ok failed: exit %d, want 3", r.code)
	}
	if r := w.jobs("wait", "--any", okLater, failFast); r.code != 0 && r.code != 3 {
		t.Errorf("wait --any: exit %d, want the status of one that ended", r.code)
	}
	quick := w.start("--", "echo", "hello")
	w.waitTerminal(quick, 30*time.Second)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"wait", quick, "--until", "hello"}, 0},
		{[]string{"wait", quick, "--until", "never printed"}, 125},
		{[]string{"wait", quick, "--idle", "1h"}, 125},
		{[]string{"wait", failFast, "--until", "never printed"}, 125},
	} {
		if r := w.jobs(c.args...); r.code != c.want {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, r.code, c.want, r.stderr)
		}
	}
}

// TestMistypedDBCreatesNothing: a read verb given a --db that is not there
// says so in one line and creates neither the file nor its directories;
// start still creates a database on first use.
func TestMistypedDBCreatesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := w.base + "/typo"
	path := dir + "/sub/jobs.db"
	for _, verb := range [][]string{{"list"}, {"status", "x"}, {"log", "x"}, {"poll", "x"}, {"wait", "x"}, {"events"}} {
		r := w.jobs(append([]string{"--db", path}, verb...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no database at") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v on a missing --db: %v", verb, r)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read created %s: %v", dir, err)
	}
	id := strings.TrimSpace(w.ok("--db", path, "start", "--", "true"))
	if r := w.jobs("--db", path, "wait", id); r.code != 0 {
		t.Errorf("wait on the database start created: %v", r)
	}
}
