package mcp

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// macClient is an in-memory client of the macos-shell profile over a
// client of its own database.
func macClient(t *testing.T) (*jobs.Client, *sdk.ClientSession) {
	t.Helper()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "mac"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, _, err := newProfileServer(c, "test", "macos-shell", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := noticeClient(t, srv)
	return c, cs
}

// TestMacLineNumbersOfOneStream: a line read with type keeps its number
// in the whole output (the document numbers lines as they arrive, over
// both streams) and its own time; fromLine counts in the same numbers.
func TestMacLineNumbersOfOneStream(t *testing.T) {
	t.Parallel()
	c, cs := macClient(t)
	// Each line is written once the one before it is stored (the test
	// says so with a file): lines of two pipes are stored in the order
	// they are read, which on a busy machine need not be the order of
	// writes close together.
	dir := t.TempDir()
	lines := []string{"echo o1", "echo e2 >&2", "echo o3", "echo e4 >&2", "echo o5"}
	var script []string
	for i, l := range lines {
		if i > 0 {
			script = append(script, fmt.Sprintf("while [ ! -e %s/%d ]; do sleep 0.05; done", dir, i))
		}
		script = append(script, l)
	}
	run := callOK[map[string]any](t, cs, "run_background", map[string]any{"command": strings.Join(script, "; ")})
	id, _ := run["processId"].(string)
	for i, want := range []string{"o1", "e2", "o3", "e4"} {
		testwait.For(t, time.Minute, want+" stored", func() bool {
			out, err := c.Log(t.Context(), id, jobs.Range{})
			return err == nil && strings.Contains(out.Text, want+"\n")
		})
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i+1)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Wait(t.Context(), []string{id}, jobs.WaitOptions{Timeout: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	all := callOK[macOutput](t, cs, "get_process_output", map[string]any{"processId": id})
	at := map[int64]string{}
	for _, l := range all.Output {
		at[l.LineNumber] = l.Timestamp
	}
	for _, c := range []struct {
		typ  string
		from int
		want string
	}{
		{"stdout", 0, "1:o1 3:o3 5:o5"},
		{"stderr", 0, "2:e2 4:e4"},
		{"stderr", 3, "4:e4"},
		{"stdout", 2, "3:o3 5:o5"},
		{"all", 4, "4:e4 5:o5"},
	} {
		args := map[string]any{"processId": id, "type": c.typ}
		if c.from > 0 {
			args["fromLine"] = c.from
		}
		out := callOK[macOutput](t, cs, "get_process_output", args)
		var got []string
		for _, l := range out.Output {
			got = append(got, strconv.FormatInt(l.LineNumber, 10)+":"+l.Content)
			if l.Timestamp != at[l.LineNumber] {
				t.Errorf("type %s: line %d stamped %s, the line itself %s", c.typ, l.LineNumber, l.Timestamp, at[l.LineNumber])
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("type %s fromLine %d: %v, want %s", c.typ, c.from, got, c.want)
		}
	}
}

// TestMacPausedIsStopped: SIGSTOP through kill_process shows the process
// stopped (paused, no exit code) until SIGCONT makes it running again; a
// process that exited 0 is stopped with its exit code.
func TestMacPausedIsStopped(t *testing.T) {
	t.Parallel()
	_, cs := macClient(t)
	run := callOK[map[string]any](t, cs, "run_background", map[string]any{"command": "sleep 60"})
	id, _ := run["processId"].(string)
	k := callOK[map[string]any](t, cs, "kill_process", map[string]any{"processId": id, "signal": "SIGSTOP"})
	if k["previousStatus"] != "running" || k["newStatus"] != "stopped" {
		t.Errorf("SIGSTOP: %v", k)
	}
	type listed struct {
		Processes []macProc `json:"processes"`
	}
	l := callOK[listed](t, cs, "list_processes", map[string]any{"status": "stopped"})
	if len(l.Processes) != 1 || !l.Processes[0].Paused || l.Processes[0].ExitCode != nil {
		t.Errorf("stopped processes after SIGSTOP: %+v", l.Processes)
	}
	if l := callOK[listed](t, cs, "list_processes", map[string]any{"status": "running"}); len(l.Processes) != 0 {
		t.Errorf("a paused process is listed running: %+v", l.Processes)
	}
	k = callOK[map[string]any](t, cs, "kill_process", map[string]any{"processId": id, "signal": "SIGCONT"})
	if k["newStatus"] != "running" {
		t.Errorf("SIGCONT: %v", k)
	}
	callOK[map[string]any](t, cs, "kill_process", map[string]any{"processId": id})
}

// TestMacWarnings: a process whose stored output nears its cap, one that
// uses half the machine's memory, and buffers past the total threshold
// are warned of; others are not.
func TestMacWarnings(t *testing.T) {
	t.Parallel()
	full := macProc{ID: "full", BufferBytes: 60 << 20, job: jobs.Job{MaxOutput: 64 << 20}}
	calm := macProc{ID: "calm", BufferBytes: 1 << 20, job: jobs.Job{MaxOutput: 64 << 20}}
	big := macProc{ID: "big", Resources: &macResources{Source: "live", Memory: 9000, MemoryPercent: 55}}
	ended := macProc{ID: "ended", Resources: &macResources{Source: "exit", Memory: 9000, MemoryPercent: 55}}
	if w := macWarnings([]macProc{calm, ended}, 1<<20); len(w) != 0 {
		t.Errorf("warnings for calm processes: %q", w)
	}
	w := macWarnings([]macProc{full, calm, big}, macTotalBufferWarn)
	if len(w) != 3 || !strings.Contains(w[0], "process full") || !strings.Contains(w[0], "93%") ||
		!strings.Contains(w[1], "process big") || !strings.Contains(w[1], "55%") || !strings.Contains(w[2], "512 MiB") {
		t.Errorf("warnings: %q", w)
	}
}

// TestMacLineTimestamps: get_process_output's line objects carry each
// line's own stream and time (of the stored chunk holding its end), not
// one time for all.
func TestMacLineTimestamps(t *testing.T) {
	t.Parallel()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "mac"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, _, err := newProfileServer(c, "test", "macos-shell", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := noticeClient(t, srv)

	// The job writes its stderr lines only once its stdout line is
	// stored: stdout and stderr are two pipes, read in no fixed order,
	// and a supervisor kept off the CPU (beside stress-ng its stdout
	// pump once read "early" 12 s after "late") would find both written
	// and store them in either order. The unfinished last line goes to
	// stderr after late (and shares its chunk, hence its time: a chunk
	// is stamped with its latest write).
	gate := filepath.Join(t.TempDir(), "go")
	run := callOK[map[string]any](t, cs, "run_background", map[string]any{"command": "echo early; while [ ! -e '" + gate + "' ]; do sleep 0.05; done; echo late >&2; printf unfinished >&2"})
	id, _ := run["processId"].(string)
	testwait.For(t, time.Minute, "the first line stored", func() bool {
		j, err := c.Get(t.Context(), id)
		return err == nil && j.OutputBytes >= int64(len("early\n"))
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(t.Context(), []string{id}, jobs.WaitOptions{Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	out := callOK[macOutput](t, cs, "get_process_output", map[string]any{"processId": id})
	if len(out.Output) != 3 {
		t.Fatalf("lines: %+v", out.Output)
	}
	at := make([]time.Time, 3)
	for i, l := range out.Output {
		if at[i], err = time.Parse(time.RFC3339Nano, l.Timestamp); err != nil {
			t.Fatalf("line %d timestamp %q: %v", i+1, l.Timestamp, err)
		}
	}
	if got := []string{out.Output[0].Type, out.Output[1].Type, out.Output[2].Type}; got[0] != "stdout" || got[1] != "stderr" || got[2] != "stderr" {
		t.Errorf("types %v, want stdout, stderr, stderr", got)
	}
	// A line is stamped when the supervisor read it: on a loaded machine
	// the two may be stamped in the same millisecond, so only the order is
	// certain, not a gap.
	if at[1].Before(at[0]) {
		t.Errorf("the line written after the first was stored is stamped earlier (%s, %s)", out.Output[0].Timestamp, out.Output[1].Timestamp)
	}
	if at[2].Before(at[1]) {
		t.Errorf("the last line is stamped before the one above it: %v", at)
	}
	// One stream's own lines carry their own times too.
	errs := callOK[macOutput](t, cs, "get_process_output", map[string]any{"processId": id, "type": "stderr"})
	if len(errs.Output) != 2 || errs.Output[0].Content != "late" || errs.Output[0].Timestamp != out.Output[1].Timestamp {
		t.Errorf("type=stderr: %+v, want late stamped %s", errs.Output, out.Output[1].Timestamp)
	}
	from := callOK[macOutput](t, cs, "get_process_output", map[string]any{"processId": id, "fromLine": 2, "lines": 1})
	if len(from.Output) != 1 || from.Output[0].Timestamp != out.Output[1].Timestamp || from.Output[0].LineNumber != 2 {
		t.Errorf("fromLine=2: %+v", from.Output)
	}
}

// TestMacStreamWakesForALine: stream_process_output, which sleeps until
// the database changes, returns a line written after it began waiting,
// while the process still runs (neither its end nor the timeout).
func TestMacStreamWakesForALine(t *testing.T) {
	t.Parallel()
	c, cs := macClient(t)
	run := callOK[map[string]any](t, cs, "run_background", map[string]any{"command": "sleep 1.5; echo late; sleep 120"})
	id, _ := run["processId"].(string)
	defer c.Kill(t.Context(), id, 0)
	out := callOK[macOutput](t, cs, "stream_process_output", map[string]any{"processId": id, "afterLine": 0, "timeout": 60})
	if len(out.Output) != 1 || out.Output[0].Content != "late" {
		t.Fatalf("stream: %+v, want the line late", out.Output)
	}
	if out.Status != "running" {
		t.Errorf("stream returned with the process %s, want running", out.Status)
	}
}
