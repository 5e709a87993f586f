package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentjobs/jobs/internal/testlong"
)

// The tests in this file drive the real `jobs mcp` over stdio with the
// SDK's client, each against its own database.

const countTo500 = `i=0; while [ $i -lt 500 ]; do i=$((i+1)); echo "line $i"; done`

func TestStdioBackgroundPollLog(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "paging", nil)
	id := start(t, cs, countTo500, map[string]any{"label": "count"})

	// Poll until done, blocking server-side in between.
	deadline := time.Now().Add(60 * time.Second)
	var p pollResult
	for {
		p = callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		if terminal(p.Status) {
			break
		}
		if p.RetryInMs <= 0 {
			t.Fatalf("running job polled without retry_in_ms: %+v", p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s after 60 s", p.Status)
		}
		callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 1})
	}
	if p.Status != "done" || p.ExitCode == nil || *p.ExitCode != 0 {
		t.Fatalf("final poll: status %s exit %v, want done 0", p.Status, p.ExitCode)
	}
	if got, want := p.OutputInfo.TotalBytes, int64(len(lines(1, 500))); got != want {
		t.Errorf("total_bytes = %d, want %d", got, want)
	}
	if p.RetryInMs != 0 {
		t.Errorf("finished job: retry_in_ms = %d, want 0", p.RetryInMs)
	}

	logOf := func(args map[string]any) logPage {
		t.Helper()
		args["action"], args["sessionId"] = "log", id
		if args["unit"] == nil {
			args["unit"] = "lines"
		}
		return callOK[logPage](t, cs, "process", args)
	}
	// unit=lines, default: the last 200 lines.
	l := logOf(map[string]any{})
	if got, want := l.Output, lines(301, 500); got != want {
		t.Errorf("default log page:\n got %.80q…\nwant %.80q…", got, want)
	}
	if l.OutputInfo.FirstLine != 301 || l.OutputInfo.TotalLines != 500 || l.OutputInfo.OmittedBefore == 0 {
		t.Errorf("default log page: first_line %d total_lines %d omitted_before %d, want 301, 500, >0",
			l.OutputInfo.FirstLine, l.OutputInfo.TotalLines, l.OutputInfo.OmittedBefore)
	}
	if !strings.Contains(l.OutputInfo.Note, "offset=0") {
		t.Errorf("default log page note %q does not say how to read the start", l.OutputInfo.Note)
	}
	// Page forward by lines.
	l = logOf(map[string]any{"offset": 0, "limit": 100})
	if got, want := l.Output, lines(1, 100); got != want {
		t.Errorf("page 1: got %.80q…, want %.80q…", got, want)
	}
	if l.OutputInfo.NextOffset == nil || *l.OutputInfo.NextOffset != 100 {
		t.Fatalf("page 1: next_offset = %v, want 100", l.OutputInfo.NextOffset)
	}
	l = logOf(map[string]any{"offset": *l.OutputInfo.NextOffset, "limit": 100})
	if got, want := l.Output, lines(101, 200); got != want {
		t.Errorf("page 2: got %.80q…, want %.80q…", got, want)
	}
	// A huge limit is capped and says so.
	l = logOf(map[string]any{"offset": 0, "limit": 1_000_000_000})
	if got, want := l.Output, lines(1, 500); got != want {
		t.Errorf("huge limit: got %d bytes, want the whole log (%d bytes)", len(got), len(want))
	}
	if !strings.Contains(l.OutputInfo.Note, "capped") {
		t.Errorf("huge limit: note %q does not say it was capped", l.OutputInfo.Note)
	}
	// Bytes.
	l = logOf(map[string]any{"unit": "bytes", "offset": 0, "limit": 14})
	if got, want := l.Output, "line 1\nline 2\n"; got != want {
		t.Errorf("byte page: got %q, want %q", got, want)
	}
	if l.OutputInfo.NextOffset == nil || *l.OutputInfo.NextOffset != 14 {
		t.Errorf("byte page: next_offset = %v, want 14", l.OutputInfo.NextOffset)
	}
	// Past the end: empty, not an error.
	l = logOf(map[string]any{"offset": 10_000})
	if l.Output != "" {
		t.Errorf("past the end: got %q, want nothing", l.Output)
	}
	// Negative offset: a clear tool error, and the server carries on.
	callErr(t, cs, "process", map[string]any{"action": "log", "sessionId": id, "offset": -5}, "offset must not be negative")
	callOK[listResult](t, cs, "process", map[string]any{"action": "list"})
}

func TestStdioPollBackoff(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "backoff", nil)
	id := start(t, cs, "sleep 60", nil)
	var got []int64
	for range 4 {
		p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		got = append(got, p.RetryInMs)
		if p.WaitingForInput {
			t.Errorf("sleep is not reading stdin, but poll says waiting_for_input")
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("retry_in_ms while nothing changes = %v, want it to grow", got)
		}
	}
	k := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})
	if k.Status != "killed" {
		t.Errorf("kill: status %q, want killed", k.Status)
	}
}

func TestStdioForeground(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "fg", nil)

	r := callOK[executeResult](t, cs, "execute_command", map[string]any{
		"command": `printf 'hello\n'; printf 'oops\n' >&2; printf '\033[31mred\033[0m\n'; printf 'progress 10%%\rprogress 50%%\rprogress 100%%\n'; exit 3`,
	})
	if r.Status != "error" || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("status %s exit %v, want error 3 (OpenClaw's word for a non-zero exit)", r.Status, r.ExitCode)
	}
	if r.Output == nil {
		t.Fatal("finished command without output")
	}
	out := *r.Output
	for _, want := range []string{"hello\n", "oops\n", "red\n", "progress 100%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "progress 10%") {
		t.Errorf("output %q is not cleaned", out)
	}

	dir := t.TempDir()
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{
		"command": `echo "$GREETING"; pwd`,
		"env":     map[string]any{"GREETING": "hi there"},
		"cwd":     dir,
	})
	if r.Status != "done" || !strings.Contains(*r.Output, "hi there\n") || !strings.Contains(*r.Output, dir) {
		t.Errorf("env and cwd: status %s output %q", r.Status, *r.Output)
	}

	// Still running after the window: the id comes back and the job runs on.
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "echo started; sleep 60", "yieldMs": 300})
	if r.Status != "running" || r.SessionID == "" {
		t.Fatalf("yield: got %+v, want running with a sessionId", r)
	}
	if !strings.Contains(r.Note, "action=wait") {
		t.Errorf("yield note %q does not say how to wait", r.Note)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": r.SessionID})

	// The timeout ends the job.
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "sleep 60", "timeout": 500}) // milliseconds, as the documents say
	if r.Status != "killed" || !strings.HasPrefix(r.Reason, "timed out after") {
		t.Errorf("timeout: status %s reason %q, want killed, timed out after …", r.Status, r.Reason)
	}

	// A command that cannot start is a tool error.
	res := call(t, cs, "execute_command", map[string]any{"command": "true", "cwd": "/no/such/dir"})
	if !res.IsError {
		t.Errorf("missing cwd: want a tool error, got %s", text(res))
	}
}

func TestStdioWriteEOF(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "stdin", nil)
	id := start(t, cs, `read name; echo "hello $name"; cat; echo "stdin closed"; sleep 60`, nil)

	deadline := time.Now().Add(30 * time.Second)
	for {
		p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		if p.WaitingForInput {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll never said waiting_for_input: %+v", p)
		}
		callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 0.2})
	}

	w := callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": "world\n"})
	if w.Written != 6 || w.StdinClosed {
		t.Errorf("write: %+v, want 6 bytes, stdin open", w)
	}
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "until": "hello world", "timeout": 20})
	if p.WaitReason != "matched" {
		t.Fatalf("wait for the reply: %+v", p)
	}
	w = callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": "more\n", "eof": true})
	if !w.StdinClosed {
		t.Errorf("write with eof: %+v, want stdin closed", w)
	}
	p = callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "until": "^stdin closed$", "timeout": 20})
	if p.WaitReason != "matched" {
		t.Fatalf("wait for eof: %+v", p)
	}
	callErr(t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": "x"}, "Session "+id+" stdin is not available")
	callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})

	done := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "true"})
	callErr(t, cs, "process", map[string]any{"action": "write", "sessionId": done.SessionID, "data": "x"}, "Session "+done.SessionID+" is not running")
}

// TestStdioBigWrite: one write of many pipe buffers reaches the job whole
// (1 MiB, sixteen pipe buffers; 10 MiB with the long sizes); one past
// maxWriteBytes is refused.
func TestStdioBigWrite(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "big", nil)
	id := start(t, cs, "wc -c", nil)
	n := testlong.Pick(1<<20, 10<<20)
	w := callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": strings.Repeat("a", n), "eof": true})
	if w.Written != n {
		t.Fatalf("%d MiB write: wrote %d bytes", n>>20, w.Written)
	}
	r := waitDone(t, cs, id)
	if !strings.Contains(r.Output, strconv.Itoa(n)) {
		t.Errorf("wc -c says %q, want %d", r.Output, n)
	}
	// Past the limit: refused, saying why, and the server carries on.
	callErr(t, cs, "process", map[string]any{"action": "write", "sessionId": id, "data": strings.Repeat("b", maxWriteBytes+1)}, "at most")
	callOK[listResult](t, cs, "process", map[string]any{"action": "list"})
}

var childRE = regexp.MustCompile(`child (\d+)`)

func TestStdioKillTree(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "kill", nil)
	// Three processes under the shell: a sleep, and a second shell with a
	// sleep of its own; each reports its pid.
	id := start(t, cs, `sleep 300 & echo "child $!"; sh -c 'sleep 300 & echo "child $!"; wait' & echo "child $!"; wait`, nil)
	var pids []int
	waitFor(t, "three child pids in the log", 20*time.Second, func() bool {
		l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": id})
		pids = pids[:0]
		for _, m := range childRE.FindAllStringSubmatch(l.Output, -1) {
			pid, _ := strconv.Atoi(m[1])
			pids = append(pids, pid)
		}
		return len(pids) == 3
	})

	k := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})
	if k.Status != "killed" || len(k.Signalled) == 0 || len(k.Survivors) != 0 {
		t.Fatalf("kill: %+v, want killed, pids signalled, no survivors", k)
	}
	for _, pid := range pids {
		waitFor(t, fmt.Sprintf("pid %d to go", pid), 10*time.Second, func() bool { return gone(pid) })
	}
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id}); p.Status != "killed" {
		t.Errorf("poll after kill: status %s", p.Status)
	}
	// Killing again is a no-op; a signal to a finished job is an error.
	if k := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id}); !k.AlreadyDone {
		t.Errorf("second kill: %+v, want already_done", k)
	}
	callErr(t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id, "signal": "INT"}, "Session "+id+" is not running")
}

// gone reports whether pid has exited (a zombie counts: it has exited and
// only waits to be reaped).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func TestStdioSignal(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "signal", nil)
	id := start(t, cs, `trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.1; done`, nil)
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "until": "ready", "timeout": 20}); p.WaitReason != "matched" {
		t.Fatalf("wait for ready: %+v", p)
	}
	k := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id, "signal": "INT"})
	if len(k.Signalled) == 0 {
		t.Fatalf("signal INT: %+v, want pids", k)
	}
	r := waitDone(t, cs, id)
	if r.ExitCode == nil || *r.ExitCode != 7 {
		t.Errorf("after INT: status %s exit %v output %q, want exit 7", r.Status, r.ExitCode, r.Output)
	}
}

func TestStdioWait(t *testing.T) {
	t.Parallel()
	var progress atomic.Int32
	cs := newEnv(t).serve(t, "wait", &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	id := start(t, cs, `i=0; while [ $i -lt 25 ]; do i=$((i+1)); echo "tick $i"; sleep 0.1; done; echo READY; sleep 60`, nil)
	params := &sdk.CallToolParams{Name: "process", Arguments: map[string]any{"action": "wait", "sessionId": id, "until": "^READY$", "timeout": 30}}
	params.SetProgressToken("wait-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("wait until: %v %s", err, text(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"wait_reason":"matched"`) || !strings.Contains(string(sc), `"match":"READY"`) {
		t.Fatalf("wait until: %s", sc)
	}
	if progress.Load() == 0 {
		t.Errorf("a 2.5 s wait with a progress token sent no progress notification")
	}

	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "idle": 0.5, "timeout": 20})
	if p.WaitReason != "idle" || p.Status != "running" {
		t.Errorf("wait idle: %+v", p)
	}
	p = callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 0.3})
	if p.WaitReason != "timeout" || p.Status != "running" {
		t.Errorf("wait timeout: %+v", p)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})

	// A timeout past the cap is capped, and says so.
	id = start(t, cs, "sleep 0.3; echo bye", nil)
	p = callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 100000})
	if p.WaitReason != "exited" || p.Status != "done" || !strings.Contains(p.Note, "capped") || !strings.Contains(p.Output, "bye") {
		t.Errorf("capped wait: %+v", p)
	}
}

func TestStdioScopeIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.serve(t, "agent-a", nil)
	b := e.serve(t, "agent-b", nil)
	id := start(t, a, "echo secret; sleep 60", map[string]any{"name": "server"})
	for _, action := range []string{"poll", "log", "status", "wait"} {
		callErr(t, b, "process", map[string]any{"action": action, "sessionId": id}, "Session "+id+" not found")
	}
	for _, action := range []string{"kill", "remove", "clear"} {
		callErr(t, b, "kill_process", map[string]any{"action": action, "sessionId": id}, "Session "+id+" not found")
	}
	callErr(t, b, "process", map[string]any{"action": "poll", "sessionId": "server"}, "Session server not found")
	if l := callOK[listResult](t, b, "process", map[string]any{"action": "list"}); len(l.Sessions) != 0 || l.Scope != "agent-b" {
		t.Errorf("scope b lists %+v", l)
	}
	l := callOK[listResult](t, a, "process", map[string]any{"action": "list"})
	if len(l.Sessions) != 1 || l.Sessions[0].SessionID != id || l.Scope != "agent-a" {
		t.Errorf("scope a lists %+v", l)
	}
	// The same name in the other scope is free.
	idB := start(t, b, "sleep 60", map[string]any{"name": "server"})
	if idB == id {
		t.Fatal("two scopes share a job")
	}
	callOK[killResult](t, a, "kill_process", map[string]any{"action": "kill", "sessionId": "server"})
	callOK[killResult](t, b, "kill_process", map[string]any{"action": "kill", "sessionId": "server"})
}

func TestStdioErrors(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "errors", nil)
	for _, action := range []string{"poll", "log", "status", "write", "send_keys", "capture", "wait"} {
		args := map[string]any{"action": action, "sessionId": "nosuchjob"}
		switch action {
		case "write":
			args["data"] = "x"
		case "send_keys":
			args["keys"] = []string{"Enter"}
		}
		callErr(t, cs, "process", args, "Session nosuchjob not found")
	}
	for _, action := range []string{"kill", "clear", "remove"} {
		callErr(t, cs, "kill_process", map[string]any{"action": action, "sessionId": "nosuchjob"}, "Session nosuchjob not found")
		// process serves them too, as both documents say.
		callErr(t, cs, "process", map[string]any{"action": action, "sessionId": "nosuchjob"}, "Session nosuchjob not found")
	}
	callErr(t, cs, "process", map[string]any{"action": "explode", "sessionId": "x"}, "explode")
	callErr(t, cs, "process", map[string]any{"action": "poll"}, "sessionId is required")
	callErr(t, cs, "process", map[string]any{"action": "log", "sessionId": "x", "limit": "lots"}, "limit")
	callErr(t, cs, "execute_command", map[string]any{"command": 42}, "command")

	id := start(t, cs, "echo hi; sleep 60", map[string]any{"name": "web"})
	callErr(t, cs, "process", map[string]any{"action": "send_keys", "sessionId": id, "keys": []string{"Enter"}}, "is not a tmux job")
	callErr(t, cs, "process", map[string]any{"action": "capture", "sessionId": id}, "is not a tmux job")
	callErr(t, cs, "execute_command", map[string]any{"command": "sleep 1", "name": "web", "background": true}, "replace=true")
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "echo again", "name": "web", "replace": true})
	if r.SessionID == id || r.Status != "done" {
		t.Errorf("replace: %+v", r)
	}
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id}); !terminal(p.Status) {
		t.Errorf("replaced job still %s", p.Status)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("server stopped serving after errors: %v", err)
	}
}

func TestStdioStatusClearRemove(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "status", nil)
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": countTo500, "label": "count"})
	id := r.SessionID
	st := callOK[statusResult](t, cs, "process", map[string]any{"action": "status", "sessionId": id})
	if st.Session.Label != "count" || st.Session.Status != "done" || len(st.History) < 2 {
		t.Errorf("status: %+v", st)
	}
	callOK[clearResult](t, cs, "kill_process", map[string]any{"action": "clear", "sessionId": id})
	l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": id, "offset": 0})
	if l.Output != "" {
		t.Errorf("log after clear: %q", l.Output)
	}
	rm := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "remove", "sessionId": id})
	if !rm.Removed {
		t.Errorf("remove: %+v", rm)
	}
	callErr(t, cs, "process", map[string]any{"action": "poll", "sessionId": id}, "Session "+id+" not found")

	running := start(t, cs, "sleep 60", nil)
	if rm := callOK[killResult](t, cs, "kill_process", map[string]any{"action": "remove", "sessionId": running}); len(rm.Signalled) == 0 {
		t.Errorf("remove of a running job: %+v, want it killed first", rm)
	}
	if l := callOK[listResult](t, cs, "process", map[string]any{"action": "list"}); len(l.Sessions) != 0 {
		t.Errorf("list after removes: %+v", l.Sessions)
	}
}

func TestStdioRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.serve(t, "restart", nil)
	id := start(t, first, `echo begin; sleep 1; `+countTo500+`; echo end`, nil)
	if err := first.Close(); err != nil {
		t.Logf("close first server: %v", err)
	}

	second := e.serve(t, "restart", nil)
	r := waitDone(t, second, id)
	if r.Status != "done" {
		t.Fatalf("job after restart: %+v", r)
	}
	l := callOK[logPage](t, second, "process", map[string]any{"action": "log", "sessionId": id, "unit": "lines", "offset": 0, "limit": 1000})
	if got, want := l.Output, "begin\n"+lines(1, 500)+"end\n"; got != want {
		t.Errorf("full output after restart: got %d bytes, want %d", len(got), len(want))
	}
	if p := callOK[pollResult](t, second, "process", map[string]any{"action": "poll", "sessionId": id}); p.Status != "done" {
		t.Errorf("poll after restart: %+v", p)
	}
}

func TestStdioTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	t.Parallel()
	cs := newEnv(t).serve(t, "tmux", nil)
	id := start(t, cs, `printf 'name? '; read name; echo "hi $name"; sleep 60`, map[string]any{"tmux": true})
	waitFor(t, "the prompt on the screen", time.Minute, func() bool {
		c := callOK[captureResult](t, cs, "process", map[string]any{"action": "capture", "sessionId": id})
		return strings.Contains(c.Screen, "name?")
	})
	callOK[keysResult](t, cs, "process", map[string]any{"action": "send_keys", "sessionId": id, "keys": []string{"bob"}, "literal": true})
	callOK[keysResult](t, cs, "process", map[string]any{"action": "send_keys", "sessionId": id, "keys": []string{"Enter"}})
	waitFor(t, "the greeting on the screen", time.Minute, func() bool {
		c := callOK[captureResult](t, cs, "process", map[string]any{"action": "capture", "sessionId": id})
		return strings.Contains(c.Screen, "hi bob")
	})
	callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})
}
