package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// rawSession drives a server over the lenient stdio transport with raw
// lines, as a misbehaving client would.
type rawSession struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

func (r *rawSession) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("send %.60q: %v", line, err)
	}
}

// recv reads the next message, skipping notifications.
func (r *rawSession) recv() map[string]any {
	r.t.Helper()
	for r.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
			r.t.Fatalf("server wrote invalid JSON %q: %v", r.out.Text(), err)
		}
		if _, ok := m["method"]; ok && m["id"] == nil {
			continue
		}
		return m
	}
	r.t.Fatalf("server closed its output: %v", r.out.Err())
	return nil
}

func (r *rawSession) initialize() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := r.recv(); m["result"] == nil {
		r.t.Fatalf("initialize: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func serveRaw(t *testing.T) *rawSession {
	t.Helper()
	return serveRawLimit(t, maxFrame)
}

// serveRawLimit is serveRaw with inbound messages bounded at frame bytes.
func serveRawLimit(t *testing.T, frame int) *rawSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	tr := newStdioTransport(inR, outW)
	tr.maxFrame = frame
	go func() {
		done <- NewServer(&jobs.Client{}, "test").Run(t.Context(), tr)
		tr.close()
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let a pending write finish
		<-done
	})
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	return &rawSession{t: t, in: inW, out: sc}
}

func TestMalformedFramesKeepServing(t *testing.T) {
	r := serveRaw(t)
	r.initialize()
	for _, tc := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"not json", `this is not json`, -32700, nil},
		{"truncated json", `{"jsonrpc":"2.0","id":7,"method":"tools/list"`, -32700, nil},
		{"wrong version", `{"jsonrpc":"1.0","id":8,"method":"tools/list"}`, -32600, 8.0},
		{"method not a string", `{"jsonrpc":"2.0","id":"a","method":42}`, -32600, "a"},
		{"empty batch", `[]`, -32600, nil},
		{"bare number", `42`, -32600, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			r.send(tc.line)
			m := r.recv()
			e, _ := m["error"].(map[string]any)
			if e == nil || e["code"] != tc.code {
				t.Fatalf("reply = %v, want error code %v", m, tc.code)
			}
			if m["id"] != tc.id {
				t.Errorf("reply id = %v, want %v", m["id"], tc.id)
			}
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("error without a message: %v", m)
			}
		})
	}
	r.t = t
	r.send(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
	m := r.recv()
	if m["id"] != 99.0 || m["result"] == nil {
		t.Fatalf("tools/list after bad frames: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","id":100,"method":"no/such/method"}`)
	if m := r.recv(); m["error"] == nil {
		t.Fatalf("unknown method: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","id":101,"method":"tools/call","params":{"name":"process","arguments":{"action":"poll"}}}`)
	m = r.recv()
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(jsonText(m), "sessionId is required") {
		t.Fatalf("tools/call after bad frames: %v", m)
	}
}

func TestOversizedFrame(t *testing.T) {
	t.Parallel()
	// The limit lowered to 1 MiB: the same reads and the same answer as
	// at maxFrame (64 MiB), without pushing 64 MiB through the race
	// detector's instrumented reads.
	r := serveRawLimit(t, 1<<20)
	r.initialize()
	huge := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"process","arguments":{"action":"write","sessionId":"x","data":"` +
		strings.Repeat("a", 1<<20) + `"}}}`
	// Sent from another goroutine, as the server answers before it has
	// read the whole frame; the test's goroutine reports the failure.
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(r.in, huge+"\n")
		sent <- err
	}()
	m := r.recv()
	if e, _ := m["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "too large") {
		t.Fatalf("oversized frame: %v", m)
	}
	if err := <-sent; err != nil {
		t.Fatalf("send oversized frame: %v", err)
	}
	r.send(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if m := r.recv(); m["id"] != 6.0 || m["result"] == nil {
		t.Fatalf("tools/list after oversized frame: %v", m)
	}
}

func jsonText(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestAnswersBeforeEOF checks that requests followed at once by the end of
// input are still answered, as `printf '…' | jobs mcp` needs.
func TestAnswersBeforeEOF(t *testing.T) {
	for i := range 20 {
		r := serveRaw(t)
		r.initialize()
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 1000+i))
		r.in.Close()
		if m := r.recv(); m["id"] != float64(1000+i) || m["result"] == nil {
			t.Fatalf("run %d: answer before EOF: %v", i, m)
		}
	}
}

// TestIDsKeptByteForByte: the answer carries the request's id as the
// client spelled it, whatever white space surrounds it, in results and in
// errors from the SDK and from the frame filter.
func TestIDsKeptByteForByte(t *testing.T) {
	r := serveRaw(t)
	r.initialize()
	for _, tc := range []struct{ line, id string }{
		{`{ "jsonrpc" : "2.0" , "id" :  18446744073709551615 , "method" : "ping" }`, `18446744073709551615`},
		{`{"method":"ping","id":"\u0041\/b","jsonrpc":"2.0"}`, `"\u0041\/b"`},
		{`{"jsonrpc":"2.0","id":-1.25e-3,"method":"no/such/method"}`, `-1.25e-3`},
		{`{"jsonrpc":"2.0","id":1e999,"method":"ping"}`, `1e999`},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"process","arguments":{"action":"poll","n":1e999}}}`, `"x"`},
	} {
		r.send(tc.line)
		if !r.out.Scan() {
			t.Fatalf("%s: no answer", tc.line)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if got := string(m["id"]); got != tc.id {
			t.Errorf("%s: answered with id %s, want %s", tc.line, got, tc.id)
		}
	}
}
