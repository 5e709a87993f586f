package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inProcess opens a client on a fresh database and serves it in memory.
func inProcess(t *testing.T) *sdk.ClientSession {
	t.Helper()
	cs, _ := inProcessClient(t)
	return cs
}

func inProcessClient(t *testing.T) (*sdk.ClientSession, *jobs.Client) {
	t.Helper()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return connectInMemory(t, c), c
}

// texts returns the text blocks of a result.
func texts(res *sdk.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// TestOutputIsPlainText: the output is its own text block, as written
// (no JSON escaping of < > &), after one short line; the numbers are in
// structuredContent only.
func TestOutputIsPlainText(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	res := call(t, cs, "execute_command", map[string]any{"command": "echo 'a && b <c>'"})
	got := texts(res)
	if len(got) != 2 || got[1] != "a && b <c>\n" {
		t.Fatalf("content = %q, want a line and the output as is", got)
	}
	if n := len(got[0]) + len(got[1]); n > 120 {
		t.Errorf("%d characters for an 11-byte output: %q", n, got)
	}
	if strings.Contains(got[0], "{") || res.StructuredContent == nil {
		t.Errorf("the line carries JSON or there is no structured content: %q", got[0])
	}
}

// TestShellIsBash: a command line runs under bash when it is installed,
// and the job's argv says so.
func TestShellIsBash(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "set -o pipefail; [[ 1 == 1 ]] && echo {1..3}"})
	if r.Output == nil || *r.Output != "1 2 3\n" {
		t.Fatalf("bash syntax: %+v", r)
	}
	st := callOK[statusResult](t, cs, "process", map[string]any{"action": "status", "sessionId": r.SessionID})
	if len(st.Session.Argv) != 3 || !strings.HasSuffix(st.Session.Argv[0], "/bash") || st.Session.Argv[1] != "-c" {
		t.Errorf("argv = %q, want bash -c …", st.Session.Argv)
	}
	r = callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "echo $0", "shell": "sh"})
	if r.Output == nil || !strings.HasSuffix(strings.TrimSpace(*r.Output), "sh") {
		t.Errorf("shell=sh ran %+v", r.Output)
	}
}

// TestPromptEndsTheWindow: a command blocked on stdin ends the yield
// window within about a second, with its prompt.
func TestPromptEndsTheWindow(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	// The window is the longest a call may take (the call bound): only a
	// prompt that is never seen lets it run out, however slow the machine
	// (beside a loaded race run, the start and the prompt once took
	// 30 s of a 20 s window between them). What ended it is the outcome:
	// a window that ran out says "still running after".
	r := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "printf 'continue? '; read x; echo got $x", "yieldMs": 50000})
	if strings.Contains(r.Note, "still running after") {
		t.Errorf("the window ran out with the job blocked on stdin: %q", r.Note)
	}
	if !r.WaitingForInput || r.Output == nil || *r.Output != "continue? " {
		t.Fatalf("at the prompt: %+v %+v", r, r.Output)
	}
	callOK[writeResult](t, cs, "process", map[string]any{"action": "write", "sessionId": r.SessionID, "data": "yes\n"})
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": r.SessionID, "timeout": 20})
	if p.Status != "done" || !strings.Contains(p.Output, "got yes") {
		t.Errorf("after the answer: %+v", p)
	}
}

// TestWaitSeveral: wait on several sessions returns when the first ends,
// naming it, with the others' status.
func TestWaitSeveral(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	slow := start(t, cs, "sleep 300", nil)
	fast := start(t, cs, "sleep 0.3; echo fast", nil)
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionIds": []string{slow, fast}, "timeout": 20})
	if p.SessionID != fast || p.Status != "done" || !slices.Equal(p.Ended, []string{fast}) || len(p.Sessions) != 2 {
		t.Fatalf("wait any: %+v", p)
	}
	if p.Sessions[0].SessionID != slow || p.Sessions[0].Status != "running" {
		t.Errorf("the other session: %+v", p.Sessions[0])
	}
	// all=true waits for every one; the bound of the call still holds.
	p = callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionIds": []string{slow, fast}, "all": true, "timeout": 0.5})
	if p.WaitReason != "timeout" || p.Status != "running" {
		t.Errorf("wait all: %+v", p)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": slow})
}

// TestPollGivesNewest: when more is new than the budget, poll's
// new_output gives the newest part from a line start and says what it
// skipped; output is the documents' last 500 characters, every poll.
func TestPollGivesNewest(t *testing.T) {
	t.Parallel()
	cs, c := inProcessClient(t)
	id := start(t, cs, "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo \"compiling unit $i\"; done; echo READY; sleep 300", nil)
	// Wait without reading, as another reader would.
	if _, err := c.Wait(t.Context(), []string{id}, jobs.WaitOptions{Until: "^READY$", Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
	if p.NewOutput == nil || !strings.HasSuffix(*p.NewOutput, "READY\n") || !strings.HasPrefix(*p.NewOutput, "compiling unit ") || len(*p.NewOutput) > defaultPollChars {
		t.Fatalf("poll new_output: %v", p.NewOutput)
	}
	if p.NewOutputInfo == nil || p.NewOutputInfo.Skipped == 0 || !strings.Contains(p.Note, "offset=0") {
		t.Errorf("new_output_info %+v, note %q", p.NewOutputInfo, p.Note)
	}
	if len(p.Output) != defaultPollChars || !strings.HasSuffix(p.Output, "unit 3000\nREADY\n") {
		t.Errorf("poll output: %d characters %q, want the last %d", len(p.Output), p.Output, defaultPollChars)
	}
	first, firstRetry := p.Output, p.RetryInMs
	p = callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
	// Nothing changed, so the hint backs off a step: at least twice the
	// first (it also grows with the silence, which a slow machine
	// lengthens between the two polls).
	if p.NewOutput == nil || *p.NewOutput != "" || p.Output != first || p.RetryInMs < 2*firstRetry || firstRetry < 1000 {
		t.Errorf("second poll: new %v, output %q, retry %d ms after %d ms", p.NewOutput, p.Output, p.RetryInMs, firstRetry)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": id})
}

// TestParametersBelongToTheirAction: a parameter the action does not take
// is refused with the list of those it takes; the original interfaces' spellings are
// accepted.
func TestParametersBelongToTheirAction(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	id := start(t, cs, "echo one; echo two; sleep 300", map[string]any{"run_in_background": true, "background": false})
	callErr(t, cs, "process", map[string]any{"action": "poll", "sessionId": id, "until": "x"}, "does not take until; it takes sessionId, timeout, grep, filter")
	callErr(t, cs, "process", map[string]any{"action": "status", "sessionId": id, "limit": 3}, "does not take limit")
	callErr(t, cs, "kill_process", map[string]any{"action": "clear", "sessionId": id, "signal": "INT"}, "does not take signal")
	callErr(t, cs, "process", map[string]any{"action": "kill", "sessionId": id, "limit": 3}, "process action=kill does not take limit; it takes sessionId, signal")
	// Empty values ask for nothing and pass.
	callOK[statusResult](t, cs, "process", map[string]any{"action": "status", "sessionId": id, "until": "", "eof": false})
	callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "until": "two", "timeout": 10})
	l := callOK[logPage](t, cs, "process", map[string]any{"action": "log", "sessionId": id, "filter": "tw"})
	if l.Output != "two\n" {
		t.Errorf("log filter=tw: %q", l.Output)
	}
	callErr(t, cs, "process", map[string]any{"action": "log", "sessionId": id, "offset": 1e30}, "number too large")
	callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": id})
}

// TestListIsShort: list takes status and limit filters and spends at most
// about 120 characters per session.
func TestListIsShort(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	for i := range 4 {
		start(t, cs, fmt.Sprintf("sleep 300 # a long comment that makes the command line longer than a list line should be %d", i), nil)
	}
	done := callOK[executeResult](t, cs, "execute_command", map[string]any{"command": "true"})
	res := call(t, cs, "process", map[string]any{"action": "list", "status": "running", "limit": 3})
	got := texts(res)
	rows := strings.Split(got[0], "\n")[1:]
	if len(rows) != 3 || !strings.Contains(got[0], "; 1 more (cursor=") {
		t.Fatalf("list status=running limit=3: %q", got[0])
	}
	for _, row := range rows {
		if len(row) > 120 || strings.Contains(row, done.SessionID) {
			t.Errorf("row of %d characters: %q", len(row), row)
		}
	}
	callErr(t, cs, "process", map[string]any{"action": "list", "status": "sleeping"}, "unknown status")
	l := callOK[listResult](t, cs, "process", map[string]any{"action": "list", "status": "active"})
	for _, s := range l.Sessions {
		callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": s.SessionID})
	}
}

// serveRawClient is serveRaw on a real client, with a frame limit.
func serveRawClient(t *testing.T, frame int) (*rawSession, *stdioTransport) {
	t.Helper()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	tr := newStdioTransport(inR, outW)
	tr.maxFrame = frame
	go func() {
		done <- NewServer(c, "test").Run(t.Context(), tr)
		tr.close()
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-done
		c.Close()
	})
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	return &rawSession{t: t, in: inW, out: sc}, tr
}

// TestCancelledRequestIsNotAnswered: after notifications/cancelled the
// server sends no response to that request, and serves on.
func TestCancelledRequestIsNotAnswered(t *testing.T) {
	t.Parallel()
	r, tr := serveRawClient(t, maxFrame)
	r.initialize()
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"sleep 300","background":true}}}`)
	m := r.recv()
	var id string
	if sc, ok := m["result"].(map[string]any)["structuredContent"].(map[string]any); ok {
		id, _ = sc["sessionId"].(string)
	}
	if id == "" {
		t.Fatalf("start: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"process","arguments":{"action":"wait","sessionId":"` + id + `","timeout":30}}}`)
	// The SDK knows the request by the server's own id for it.
	var ours string
	waitFor(t, "the wait to be in flight", 10*time.Second, func() bool {
		ours = string(tr.ids.lookup([]byte("5")))
		tr.pending.mu.Lock()
		defer tr.pending.mu.Unlock()
		return ours != "" && tr.pending.ids[ours]
	})
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"}}`)
	// The handler ends at once; its answer is dropped.
	waitFor(t, "the cancelled call to end", 10*time.Second, func() bool {
		tr.pending.mu.Lock()
		defer tr.pending.mu.Unlock()
		return !tr.pending.ids[ours]
	})
	r.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"kill_process","arguments":{"sessionId":"` + id + `"}}}`)
	if m := r.recv(); m["id"] != 6.0 {
		t.Fatalf("after the cancel the next message is %v, want the answer to request 6", m)
	}
}

// TestOversizeFrameKeepsItsID: a frame over the limit is answered with its
// id when the id can be read at either end, so the client stops waiting.
func TestOversizeFrameKeepsItsID(t *testing.T) {
	t.Parallel()
	r, _ := serveRawClient(t, 64<<10)
	r.initialize()
	big := strings.Repeat("a", 100<<10)
	for _, tc := range []struct {
		line string
		id   any
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"process","arguments":{"action":"write","sessionId":"x","data":"` + big + `"}}}`, 7.0},
		{`{"method":"tools/call","params":{"name":"process","arguments":{"action":"write","sessionId":"x","data":"` + big + `"}},"jsonrpc":"2.0","id":"last"}`, "last"},
		{`{"method":"tools/call","params":{"data":"` + big + `"}}`, nil},
	} {
		// The frame is written while the answer is read: the pipe holds
		// nothing, and the server answers before it has read the rest.
		sent := make(chan error, 1)
		go func(line string) {
			_, err := io.WriteString(r.in, line+"\n")
			sent <- err
		}(tc.line)
		m := r.recv()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatalf("send an oversize frame: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the server stopped reading an oversize frame")
		}
		if e, _ := m["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "too large") || m["id"] != tc.id {
			t.Errorf("oversize frame: %v, want id %v", m, tc.id)
		}
	}
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	if m := r.recv(); m["id"] != 8.0 {
		t.Fatalf("after oversize frames: %v", m)
	}
}

// TestNumberTooLarge: an out-of-range number reads "number too large",
// not the decoder's account of Go types.
func TestNumberTooLarge(t *testing.T) {
	t.Parallel()
	var c count
	for _, in := range []string{"1e30", "99999999999999999999", "-1e300"} {
		err := json.Unmarshal([]byte(in), &c)
		if err == nil || !strings.Contains(err.Error(), "number too large") {
			t.Errorf("%s: %v", in, err)
		}
	}
	if err := json.Unmarshal([]byte("42"), &c); err != nil || c != 42 {
		t.Errorf("42: %v %d", err, c)
	}
	if err := json.Unmarshal([]byte("1.5"), &c); err == nil {
		t.Error("1.5 accepted as a whole number")
	}
	r, _ := serveRawClient(t, maxFrame)
	r.initialize()
	r.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"process","arguments":{"action":"log","sessionId":"x","limit":1e400}}}`)
	m := r.recv()
	if s := jsonText(m); !strings.Contains(s, "number too large") || strings.Contains(s, "Go") || strings.Contains(s, "int64") {
		t.Errorf("limit 1e400: %s", s)
	}
}

// TestPollTimeoutBlocks: poll with timeout (OpenClaw's blocking poll)
// returns when new output arrives, not at once and not at the timeout.
func TestPollTimeoutBlocks(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	id := start(t, cs, "sleep 0.5; echo late; sleep 300", nil)
	// The timeout is the call bound: a poll that returns before it came
	// back on the output, however slow the machine (a 20 s timeout was
	// once used up by a start and a prompt beside a loaded race run).
	t0 := time.Now()
	p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id, "timeout": 50})
	if took := time.Since(t0); p.Output != "late\n" || took >= 50*time.Second {
		t.Errorf("blocking poll: %q after %s", p.Output, took)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": id})
}

// TestWaitSeveralShowsEveryEndedTail: two sessions end together, one
// failing; a wait on both (and a third still running) shows each ended
// session's output in the one answer, the failed one first, so reading
// the failure costs no second call.
func TestWaitSeveralShowsEveryEndedTail(t *testing.T) {
	t.Parallel()
	cs := inProcess(t)
	// Both end once the file exists: together, whatever the machine's pace.
	gate := t.TempDir() + "/go"
	a := start(t, cs, "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo out-A", nil)
	b := start(t, cs, "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo out-B; exit 3", nil)
	c := start(t, cs, "sleep 60", nil)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Until both have ended (a wait may return on the first alone),
	// looking without reading their output.
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range []string{a, b} {
		for !strings.Contains(text(call(t, cs, "process", map[string]any{"action": "status", "sessionId": id})), "exit ") {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not end", id)
			}
			time.Sleep(50 * time.Millisecond) // between looks at a condition with a deadline
		}
	}
	res := call(t, cs, "process", map[string]any{"action": "wait", "sessionIds": []string{a, b, c}, "timeout": 50})
	if res.IsError {
		t.Fatalf("wait: %s", text(res))
	}
	all := text(res)
	if !strings.Contains(all, "out-A") || !strings.Contains(all, "out-B") {
		t.Fatalf("a wait on three sessions, two ended, shows %q: want both ended sessions' output", all)
	}
	if strings.Index(all, "out-B") > strings.Index(all, "out-A") {
		t.Errorf("the failed session's output comes after the other's: %q", all)
	}
	var r pollResult
	b2, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b2, &r); err != nil {
		t.Fatal(err)
	}
	if r.SessionID != b || r.Status != "error" {
		t.Errorf("the result is about %s (%s), want the failed %s", r.SessionID, r.Status, b)
	}
	var sawA bool
	for _, st := range r.Sessions {
		if st.SessionID == a && st.Output != nil && strings.Contains(*st.Output, "out-A") {
			sawA = true
		}
	}
	if !sawA {
		t.Errorf("sessions[] lacks %s's output: %+v", a, r.Sessions)
	}
	callOK[killResult](t, cs, "kill_process", map[string]any{"sessionId": c})
}
