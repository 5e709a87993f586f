package mcp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestOpenClawSeedFields: the structured results carry OpenClaw's fields
// as it spells them: status error for a non-zero exit, exitCode, and
// output as a string; list's sessions are the original's SessionMeta.
func TestOpenClawSeedFields(t *testing.T) {
	t.Parallel()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "seed000"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := connectInMemory(t, c)

	res := call(t, cs, "execute_command", map[string]any{"command": "echo boom; exit 2", "description": "fails"})
	sc, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structured content %T", res.StructuredContent)
	}
	if sc["status"] != "error" || sc["exitCode"] != float64(2) || sc["output"] != "boom\n" {
		t.Errorf("non-zero exit: status %v exitCode %v output %#v, want error 2 \"boom\\n\"", sc["status"], sc["exitCode"], sc["output"])
	}
	if _, ok := sc["exit_code"]; ok {
		t.Errorf("exit_code present beside exitCode: %v", sc)
	}
	id, _ := sc["sessionId"].(string)

	res = call(t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
	sc, _ = res.StructuredContent.(map[string]any)
	if _, isString := sc["output"].(string); !isString || sc["status"] != "error" || sc["exitCode"] != float64(2) {
		t.Errorf("poll: status %v exitCode %v output %#v, want error, 2, a string", sc["status"], sc["exitCode"], sc["output"])
	}

	res = call(t, cs, "process", map[string]any{"action": "list"})
	sc, _ = res.StructuredContent.(map[string]any)
	sessions, _ := sc["sessions"].([]any)
	if len(sessions) != 1 {
		t.Fatalf("list: %v", sc)
	}
	meta, _ := sessions[0].(map[string]any)
	for _, f := range []string{"sessionId", "command", "status", "createdAt", "lastAccessedAt", "exitCode", "outputLength", "offloaded"} {
		if _, ok := meta[f]; !ok {
			t.Errorf("list: session lacks %s: %v", f, meta)
		}
	}
	if meta["status"] != "error" || meta["outputLength"] != float64(5) || meta["offloaded"] != false || meta["createdAt"].(float64) <= 0 {
		t.Errorf("list: %v", meta)
	}
	if !strings.Contains(text(res), id+" error 2") {
		t.Errorf("list text %q does not say error", text(res))
	}
	// The original interfaces' words filter too.
	l := callOK[listResult](t, cs, "process", map[string]any{"action": "list", "status": "error"})
	if len(l.Sessions) != 1 {
		t.Errorf("list status=error: %+v", l)
	}
}

// TestOpenClawLogChars: log's offset and limit slice characters, as OpenClaw.s
// buffer slice does: multi-byte characters count once, a slice
// spans the scan's steps, the unfinished last line is read, next_offset
// continues, and without offset log reads the last limit characters.
func TestOpenClawLogChars(t *testing.T) {
	t.Parallel()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "chars"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := connectInMemory(t, c)

	// More lines than one scan step, each with a two-byte character, and
	// an unfinished last line.
	n := int(charScanLines*2 + 500)
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "é%d\n", i)
	}
	b.WriteString("tail-ü")
	full := []rune(b.String())
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{
		"command": fmt.Sprintf(`awk 'BEGIN { for (i = 1; i <= %d; i++) printf "é%%d\n", i; printf "tail-ü" }'`, n),
	})
	if r.Status != "done" {
		t.Fatalf("awk: %+v", r)
	}
	logOf := func(args map[string]any) logPage {
		t.Helper()
		args["action"], args["sessionId"] = "log", r.SessionID
		return callOK[logPage](t, cs, "process", args)
	}
	at := func(off, limit int) string { return string(full[off:min(off+limit, len(full))]) }

	for _, tc := range []struct{ off, limit int }{
		{0, 3},                          // "é1\n": three characters, four bytes
		{1, 5},                          // starts after a two-byte character
		{len(full) / 2, 40},             // inside a later scan step
		{int(charScanLines)*6 - 10, 50}, // across the end of the first step
		{len(full) - 4, 100},            // the unfinished last line, to the end
	} {
		l := logOf(map[string]any{"offset": tc.off, "limit": tc.limit})
		if got, want := l.Output, at(tc.off, tc.limit); got != want {
			t.Errorf("offset %d limit %d: got %q, want %q", tc.off, tc.limit, got, want)
		}
		if l.Unit != "chars" || l.OutputInfo.Offset == nil || *l.OutputInfo.Offset != int64(tc.off) {
			t.Errorf("offset %d: unit %q offset %v", tc.off, l.Unit, l.OutputInfo.Offset)
		}
		next := l.OutputInfo.NextOffset
		switch end := tc.off + tc.limit; {
		case end < len(full) && (next == nil || *next != int64(end)):
			t.Errorf("offset %d limit %d: next_offset %v, want %d", tc.off, tc.limit, next, end)
		case end >= len(full) && next != nil:
			t.Errorf("offset %d limit %d: next_offset %d at the end, want none", tc.off, tc.limit, *next)
		}
	}
	// Paging with next_offset reads every character once.
	var paged strings.Builder
	off := int64(len(full) - 1000)
	for range 20 {
		l := logOf(map[string]any{"offset": off, "limit": 300})
		paged.WriteString(l.Output)
		if l.OutputInfo.NextOffset == nil {
			break
		}
		off = *l.OutputInfo.NextOffset
	}
	if got, want := paged.String(), string(full[len(full)-1000:]); got != want {
		t.Errorf("paged to the end: got %d characters, want %d", len([]rune(got)), len([]rune(want)))
	}
	// Without offset: the last limit characters.
	if l := logOf(map[string]any{"limit": 6}); l.Output != "tail-ü" {
		t.Errorf("tail: got %q, want %q", l.Output, "tail-ü")
	}
	// Past the end: nothing, not an error.
	if l := logOf(map[string]any{"offset": len(full) + 10}); l.Output != "" || l.OutputInfo.NextOffset != nil {
		t.Errorf("past the end: %+v", l)
	}
	// The other units stay.
	if l := logOf(map[string]any{"unit": "lines", "offset": 1, "limit": 2}); l.Output != "é2\né3\n" {
		t.Errorf("unit=lines: %q", l.Output)
	}
	units := processSchema().Properties["unit"].Enum
	if !slices.Equal(units, []any{"chars", "lines", "bytes"}) {
		t.Errorf("unit enum %v", units)
	}
}
