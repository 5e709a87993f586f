package mcp

import (
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

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

	// The job itself pauses between its lines. stdout and stderr are two
	// pipes, read in no fixed order, so the unfinished last line goes to
	// stderr after late (and shares its chunk, hence its time: a chunk
	// is stamped with its latest write).
	run := callOK[map[string]any](t, cs, "run_background", map[string]any{"command": "echo early; sleep 0.6; echo late >&2; printf unfinished >&2"})
	id, _ := run["processId"].(string)
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
	if gap := at[1].Sub(at[0]); gap < 500*time.Millisecond {
		t.Errorf("the line written 0.6 s later is stamped %v later (%s, %s)", gap, out.Output[0].Timestamp, out.Output[1].Timestamp)
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
