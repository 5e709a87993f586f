package mcp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests check argument handling, which never reaches the backend: a
// zero Client is enough (any call into it would fail the test loudly).

func TestToolsList(t *testing.T) {
	cs := connectInMemory(t, &jobs.Client{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		if tool.Name != "process" {
			continue
		}
		schema := tool.InputSchema.(map[string]any)
		action := schema["properties"].(map[string]any)["action"].(map[string]any)
		var got []string
		for _, a := range action["enum"].([]any) {
			got = append(got, a.(string))
		}
		var want []string
		for _, a := range actions {
			want = append(want, a.name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("process action enum = %v, want %v", got, want)
		}
	}
	if got, want := strings.Join(names, ","), "execute_command,kill_process,process"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
}

func TestBadArguments(t *testing.T) {
	cs := connectInMemory(t, &jobs.Client{})
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"unknown action", "process", map[string]any{"action": "explode", "sessionId": "x"}, "explode"},
		{"missing action", "process", map[string]any{"sessionId": "x"}, "action"},
		{"missing sessionId", "process", map[string]any{"action": "poll"}, "sessionId is required for action=poll"},
		{"blank sessionId", "kill_process", map[string]any{"action": "kill", "sessionId": "  "}, "sessionId is required for action=kill"},
		{"offset of wrong type", "process", map[string]any{"action": "log", "sessionId": "x", "offset": "ten"}, "offset"},
		{"fractional limit", "process", map[string]any{"action": "log", "sessionId": "x", "limit": 1.5}, "limit"},
		{"negative offset", "process", map[string]any{"action": "log", "sessionId": "x", "offset": -1}, "offset must not be negative, got -1"},
		{"negative limit", "process", map[string]any{"action": "log", "sessionId": "x", "limit": -5}, "limit must not be negative"},
		{"negative idle", "process", map[string]any{"action": "wait", "sessionId": "x", "idle": -2}, "idle must be between 0"},
		{"negative scrollback", "process", map[string]any{"action": "capture", "sessionId": "x", "scrollback": -2}, "scrollback must not be negative"},
		{"bad unit", "process", map[string]any{"action": "log", "sessionId": "x", "unit": "pages"}, "unit"},
		{"keys not a list", "process", map[string]any{"action": "send_keys", "sessionId": "x", "keys": "Enter"}, "keys"},
		{"no keys", "process", map[string]any{"action": "send_keys", "sessionId": "x"}, "send_keys needs keys"},
		{"write without data", "process", map[string]any{"action": "write", "sessionId": "x"}, "write needs data"},
		{"eof of wrong type", "process", map[string]any{"action": "write", "sessionId": "x", "eof": "yes"}, "eof"},
		{"negative wait timeout", "process", map[string]any{"action": "wait", "sessionId": "x", "timeout": -1}, "timeout must be between 0"},
		{"unknown argument", "process", map[string]any{"action": "list", "colour": "red"}, "colour"},
		{"missing command", "execute_command", map[string]any{}, "command"},
		{"empty command", "execute_command", map[string]any{"command": ""}, "command"},
		{"blank command", "execute_command", map[string]any{"command": "   "}, "command is required"},
		{"background of wrong type", "execute_command", map[string]any{"command": "true", "background": "yes"}, "background"},
		{"negative timeout", "execute_command", map[string]any{"command": "true", "timeout": -3}, "timeout is in milliseconds and must be at least 100"},
		{"timeout under 100 ms", "execute_command", map[string]any{"command": "true", "timeout": 50}, "timeout is in milliseconds and must be at least 100 (0 = none)"},
		{"short description", "execute_command", map[string]any{"command": "true", "description": "ls"}, "description must be 5 to 100 characters, got 2"},
		{"long description", "execute_command", map[string]any{"command": "true", "description": strings.Repeat("x", 101)}, "description must be 5 to 100 characters, got 101"},
		{"huge timeout", "execute_command", map[string]any{"command": "true", "timeout": 1e300}, "timeout"},
		{"negative yield", "execute_command", map[string]any{"command": "true", "yieldMs": -1}, "yieldMs must not be negative"},
		{"env of wrong type", "execute_command", map[string]any{"command": "true", "env": []string{"A=1"}}, "env"},
		{"env name with =", "execute_command", map[string]any{"command": "true", "env": map[string]any{"A=B": "1"}}, "bad variable name"},
		{"env value not a string", "execute_command", map[string]any{"command": "true", "env": map[string]any{"A": 1}}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			callErr(t, cs, tc.tool, tc.args, tc.want)
		})
	}
	// The server still serves after all of that.
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("list tools after bad input: %v", err)
	}
}

func TestUnknownTool(t *testing.T) {
	cs := connectInMemory(t, &jobs.Client{})
	_, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "rm_rf") {
		t.Fatalf("unknown tool: got %v, want a protocol error naming it", err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("list tools after unknown tool: %v", err)
	}
}

func TestSessionErrorWording(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{jobs.ErrNotFound, "Session 7fq2 not found"},
		{jobs.ErrNotRunning, "Session 7fq2 is not running"},
		{jobs.ErrStdinClosed, "Session 7fq2 stdin is not available"},
		{fmt.Errorf("write: %w", &jobs.NotReadingError{Ref: "7fq2", Took: 65536, Size: 100000, Idle: 10 * time.Second}),
			"Session 7fq2 is not reading its stdin: it took 65536 of 100000 bytes, then none for 10s; see its output with action=poll, or close its stdin with eof=true"},
	} {
		if got := describe("7fq2", tc.err).Error(); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestBackoffGrows(t *testing.T) {
	b := newBackoff()
	var got []int64
	for range 8 {
		got = append(got, b.observe("j", "running", 10, time.Second, false).Milliseconds())
	}
	want := []int64{1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000}
	if !slices.Equal(got, want) {
		t.Fatalf("retry hints = %v, want %v", got, want)
	}
	// A change of state starts over.
	if got := b.observe("j", "running/input", 10, time.Second, false).Milliseconds(); got != 1000 {
		t.Errorf("after a change of state: retry = %d, want 1000", got)
	}
	// So does new output: the hint backs off only on silence.
	for i := range 8 {
		if got := b.observe("j", "running/input", int64(20+i), 0, false).Milliseconds(); got != 1000 {
			t.Fatalf("poll %d with new output: retry = %d, want 1000", i, got)
		}
	}
	// A job silent for long starts further on: half its silence.
	if got := b.observe("quiet", "running", 0, 40*time.Second, false).Milliseconds(); got != 20000 {
		t.Errorf("a job silent 40 s: retry = %d, want 20000", got)
	}
	if got := b.observe("j", "done", 30, time.Second, true); got != 0 {
		t.Errorf("finished job: retry = %v, want 0", got)
	}
}

// TestInProcessRoundTrip runs the tools over in-memory transports against
// an in-process client: no binary, no detached supervisor.
func TestInProcessRoundTrip(t *testing.T) {
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := connectInMemory(t, c)

	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "seq 1 5000"})
	if r.Status != "done" || r.Output == nil {
		t.Fatalf("seq: %+v", r)
	}
	if !strings.HasSuffix(*r.Output, "\n5000\n") {
		t.Errorf("tail of seq: %.40q … %.40q", *r.Output, (*r.Output)[max(0, len(*r.Output)-40):])
	}
	// The tail starts at a whole line and says what it left out.
	first, _, _ := strings.Cut(*r.Output, "\n")
	if n, err := strconv.Atoi(first); err != nil || n < 2 {
		t.Errorf("tail starts with %q, want a whole line past the first", first)
	}
	if r.OutputInfo.OmittedBefore == 0 || !strings.Contains(r.Note, "offset=0") {
		t.Errorf("tail of a long output: omitted_before %d, note %q", r.OutputInfo.OmittedBefore, r.Note)
	}

	id := start(t, cs, "cat", nil)
	callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": "ping\n", "eof": true})
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 20})
	if p.Status != "done" || p.Output != "ping\n" {
		t.Errorf("cat: %+v", p)
	}
	callErr(t, cs, "process", map[string]any{"action": "poll", "sessionId": "zzzzzzzz"}, "Session zzzzzzzz not found")

	// A page of long lines is cut to whole lines under the size bound, and
	// says where to go on.
	wide := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": `i=0; while [ $i -lt 2000 ]; do i=$((i+1)); printf '%0100d\n' $i; done`})
	l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": wide.SessionID, "unit": "lines", "offset": 0, "limit": 2000})
	if !l.OutputInfo.Truncated || len(l.Output) > maxPageChars || !strings.HasSuffix(l.Output, "\n") {
		t.Fatalf("wide page: truncated %v, %d bytes", l.OutputInfo.Truncated, len(l.Output))
	}
	if l.OutputInfo.NextOffset == nil || *l.OutputInfo.NextOffset != l.OutputInfo.Lines || !strings.Contains(l.OutputInfo.Note, "page cut") {
		t.Errorf("wide page: lines %d, next_offset %v, note %q", l.OutputInfo.Lines, l.OutputInfo.NextOffset, l.OutputInfo.Note)
	}
	next := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": wide.SessionID, "unit": "lines", "offset": *l.OutputInfo.NextOffset, "limit": 1})
	if got, want := next.Output, fmt.Sprintf("%0100d\n", *l.OutputInfo.NextOffset+1); got != want {
		t.Errorf("next page starts with %.20q…, want %.20q…", got, want)
	}
}
