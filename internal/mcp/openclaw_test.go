package mcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestOpenClawProcessKillClearRemove: process serves kill, clear and
// remove, as both documents do (their integration test is
// execute_command, then process poll, then process kill): kill ends a
// job that ignores SIGTERM after the 2 s grace, is a no-op on a dead
// session, and says "Session X not found" for an unknown one; clear
// empties the output; remove deletes the session, killing it first.
func TestOpenClawProcessKillClearRemove(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	id := start(t, cs, "trap '' TERM; echo ready; while :; do sleep 1; done", nil)
	waitFor(t, "ready", 60*time.Second, func() bool {
		p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		return strings.Contains(p.Output, "ready")
	})
	k := callOK[killResult](t, cs, "process", map[string]any{"action": "kill", "sessionId": id})
	if k.Status != "killed" || !k.Escalated || len(k.Signalled) == 0 {
		t.Errorf("kill of a job ignoring SIGTERM: %+v, want killed after SIGKILL", k)
	}
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id}); p.Status != "killed" {
		t.Errorf("poll after kill: status %s", p.Status)
	}
	// Kill already dead session: no-op (idempotent).
	if k := callOK[killResult](t, cs, "process", map[string]any{"action": "kill", "sessionId": id}); !k.AlreadyDone || len(k.Signalled) != 0 {
		t.Errorf("second kill: %+v, want a no-op", k)
	}
	callErr(t, cs, "process", map[string]any{"action": "kill", "sessionId": "nosuch"}, "Session nosuch not found")

	// clear: the output is gone, the session stays.
	callOK[clearResult](t, cs, "process", map[string]any{"action": "clear", "sessionId": id})
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id}); p.Output != "" || p.Status != "killed" {
		t.Errorf("poll after clear: %+v", p)
	}

	// remove: a running session is killed, then gone.
	live := start(t, cs, "sleep 300", nil)
	r := callOK[killResult](t, cs, "process", map[string]any{"action": "remove", "sessionId": live})
	if !r.Removed || len(r.Signalled) == 0 {
		t.Errorf("remove of a running session: %+v", r)
	}
	for _, gone := range []string{live} {
		callErr(t, cs, "process", map[string]any{"action": "poll", "sessionId": gone}, "Session "+gone+" not found")
	}
	callOK[killResult](t, cs, "process", map[string]any{"action": "remove", "sessionId": id})
	callErr(t, cs, "process", map[string]any{"action": "poll", "sessionId": id}, "Session "+id+" not found")
}

// TestOpenClawPollLastChars: every poll's output is the last 500
// characters (maxOutputChars), also when nothing is new; what is new is
// new_output.
func TestOpenClawPollLastChars(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "seq 1 400", "description": "four hundred lines"})
	for i := 0; i < 20 && r.Status == "running"; i++ {
		// The yield passed first on a busy machine: wait as an agent would.
		r.Status = callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": r.SessionID, "timeout": 30}).Status
	}
	if r.Status != "done" {
		t.Fatalf("seq: %+v", r)
	}
	all := seqLines(1, 400)
	want := all[len(all)-defaultPollChars:]
	for i := range 2 {
		p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": r.SessionID})
		if p.Output != want || p.Status != "done" || p.ExitCode == nil || *p.ExitCode != 0 || p.Offloaded {
			t.Errorf("poll %d: output %q (%d characters), status %s, offloaded %t; want the last %d characters", i+1, p.Output, len(p.Output), p.Status, p.Offloaded, defaultPollChars)
		}
		if i == 1 && (p.NewOutput == nil || *p.NewOutput != "") {
			t.Errorf("poll %d: new_output %v, want \"\"", i+1, p.NewOutput)
		}
	}
	// A short output is all of it.
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "echo short", "description": "short output"})
	for range 2 {
		if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": r.SessionID}); p.Output != "short\n" {
			t.Errorf("poll of a short output: %q", p.Output)
		}
	}
}

// TestOpenClawTimeoutMilliseconds: execute_command's timeout is in
// milliseconds (the documents' z.number().min(100), beside yieldMs).
func TestOpenClawTimeoutMilliseconds(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "sleep 300", "timeout": 90000, "background": true, "description": "a long sleep"})
	st := callOK[statusResult](t, cs, "process", map[string]any{"action": "status", "sessionId": r.SessionID})
	if st.Session.TimeoutMs != 90000 {
		t.Errorf("timeout 90000: the job's timeout is %d ms, want 90000", st.Session.TimeoutMs)
	}
	callOK[killResult](t, cs, "process", map[string]any{"action": "kill", "sessionId": r.SessionID})
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "sleep 300", "background": true, "description": "a long sleep"})
	st = callOK[statusResult](t, cs, "process", map[string]any{"action": "status", "sessionId": r.SessionID})
	if st.Session.TimeoutMs != 1800000 {
		t.Errorf("no timeout: the job's timeout is %d ms, want 1800000 (timeoutSec 1800)", st.Session.TimeoutMs)
	}
	callOK[killResult](t, cs, "process", map[string]any{"action": "kill", "sessionId": r.SessionID})
}

// TestOpenClawLogNote: a page's note names its first and last character.
func TestOpenClawLogNote(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "echo abcdefghijklmnopqrstuvwxyz", "description": "the alphabet"})
	l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": r.SessionID, "offset": 5, "limit": 10})
	if l.Output != "fghijklmno" || !strings.Contains(l.OutputInfo.Note, "characters 5-14 shown") {
		t.Errorf("log offset 5 limit 10: %q, note %q, want fghijklmno and characters 5-14", l.Output, l.OutputInfo.Note)
	}
}

// TestOpenClawOffload: output past 10 KB is offloaded to a file the
// agent's file tools read (000 "Offload Strategy", 001 US-3): poll, log
// and list say offloaded and give its path; the file holds the output,
// is kept current while the job runs, is 0600 in a 0700 directory beside
// the database, emptied by clear and deleted by remove. A small output is
// not offloaded.
func TestOpenClawOffload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: filepath.Join(dir, "jobs.db"), Scope: "offload"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := connectInMemory(t, c)

	small := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "seq 1 100", "description": "small output"})
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": small.SessionID}); p.Offloaded || p.OutputFilePath != "" {
		t.Errorf("small output offloaded: %+v", p)
	}

	// 3000 lines (about 14 KB), then a line on stdin, then more.
	id := start(t, cs, "seq 1 3000; read x; seq 3001 4000", map[string]any{"description": "large output"})
	path := filepath.Join(dir, "sessions", "offload", "bgexec_"+id+".log")
	first := seqLines(1, 3000)
	waitFor(t, "the first part in the file, with no read", 60*time.Second, func() bool {
		data, _ := os.ReadFile(path)
		return string(data) == first
	})
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
	if !p.Offloaded || p.OutputFilePath != path || p.Output != first[len(first)-defaultPollChars:] {
		t.Errorf("poll: offloaded %t path %q output %q", p.Offloaded, p.OutputFilePath, cutEnd(p.Output, 40))
	}
	callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": "go\n"})
	waitDone(t, cs, id)
	l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 10})
	var lv map[string]any
	res := call(t, cs, "process", map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 10})
	lv, _ = res.StructuredContent.(map[string]any)
	if lv["offloaded"] != true || lv["outputFilePath"] != path || l.Output != "1\n2\n3\n4\n5\n" {
		t.Errorf("log: %v", lv)
	}
	if data, _ := os.ReadFile(path); string(data) != seqLines(1, 4000) {
		t.Errorf("file after the end: %d bytes, want the whole output (%d)", len(data), len(seqLines(1, 4000)))
	}
	for pth, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(pth); err != nil {
			t.Error(err)
		} else if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", pth, fi.Mode(), want)
		}
	}
	ls := callOK[listResult](t, cs, "process", map[string]any{"action": "list"})
	for _, s := range ls.Sessions {
		if want := s.SessionID == id; s.Offloaded != want || (s.OutputFilePath == path) != want {
			t.Errorf("list: %s offloaded %t path %q", s.SessionID, s.Offloaded, s.OutputFilePath)
		}
	}
	callOK[clearResult](t, cs, "process", map[string]any{"action": "clear", "sessionId": id})
	if data, err := os.ReadFile(path); err != nil || len(data) != 0 {
		t.Errorf("file after clear: %d bytes, %v; want empty", len(data), err)
	}
	callOK[killResult](t, cs, "process", map[string]any{"action": "remove", "sessionId": id})
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file after remove: %v, want gone", err)
	}
}
