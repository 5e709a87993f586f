package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// stdioClient is `jobs mcp` driven line by line, so that the test chooses
// what initialize carries.
type stdioClient struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
	id  int
	// instructions are the server's, from initialize.
	instructions string
}

// serveWith starts `jobs mcp` in e with the environment given (JOBS_SCOPE
// unset unless given) and initializes it with clientInfo.name client and,
// when not empty, params._meta meta (a JSON object).
func (e env) serveWith(t *testing.T, extra []string, client, meta string) *stdioClient {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cmd := exec.Command(jobsBin, "mcp")
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "JOBS_SCOPE", "JOBS_DB", "JOBS_MCP_PROFILE", "XDG_STATE_HOME", "XDG_RUNTIME_DIR":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+e.state, "XDG_RUNTIME_DIR="+e.runtime)
	cmd.Env = append(cmd.Env, extra...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	c := &stdioClient{t: t, in: in, out: sc}
	params := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": client, "version": "1"}}
	if meta != "" {
		params["_meta"] = json.RawMessage(meta)
	}
	m := c.request("initialize", params)
	res, _ := m["result"].(map[string]any)
	if res == nil {
		t.Fatalf("initialize: %v", m)
	}
	c.instructions = fmt.Sprint(res["instructions"])
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return c
}

func (c *stdioClient) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// request sends a request and returns its answer, skipping notifications.
func (c *stdioClient) request(method string, params any) map[string]any {
	c.t.Helper()
	c.id++
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	for c.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
			c.t.Fatalf("server wrote %q: %v", c.out.Text(), err)
		}
		if m["id"] == float64(c.id) {
			return m
		}
	}
	c.t.Fatalf("server closed its output: %v", c.out.Err())
	return nil
}

// tool calls a tool and returns its structured content; a tool error
// returns its text as "error".
func (c *stdioClient) tool(name string, args map[string]any) map[string]any {
	c.t.Helper()
	m := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	res, _ := m["result"].(map[string]any)
	if res == nil {
		c.t.Fatalf("%s: %v", name, m)
	}
	if res["isError"] == true {
		content, _ := res["content"].([]any)
		var parts []string
		for _, x := range content {
			if tc, ok := x.(map[string]any); ok {
				parts = append(parts, fmt.Sprint(tc["text"]))
			}
		}
		return map[string]any{"error": strings.Join(parts, "\n")}
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return sc
}

func (c *stdioClient) scope() string {
	c.t.Helper()
	return fmt.Sprint(c.tool("process", map[string]any{"action": "list"})["scope"])
}

// TestOpenClawScopePerConversation: servers given no scope do not share
// one: each connection gets its own (named after its client), so one
// conversation's sessions are "not found" in another's, as the documents
// isolate them by conversationId. A client that names its conversation
// in initialize (_meta.conversationId) gets that scope, and finds its
// sessions again after a restart of the server; JOBS_SCOPE wins over both;
// the other profiles keep the scope "default".
func TestOpenClawScopePerConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.serveWith(t, nil, "Claude Code", "")
	b := e.serveWith(t, nil, "Claude Code", "")
	sa, sb := a.scope(), b.scope()
	if sa == sb || !strings.HasPrefix(sa, "mcp-claude-code-") || !strings.HasPrefix(sb, "mcp-claude-code-") {
		t.Errorf("two connections' scopes: %q and %q, want two of their own", sa, sb)
	}
	r := a.tool("execute_command", map[string]any{"command": "sleep 300", "background": true, "description": "a long sleep"})
	id, _ := r["sessionId"].(string)
	if id == "" {
		t.Fatalf("start: %v", r)
	}
	if got := b.tool("process", map[string]any{"action": "poll", "sessionId": id}); got["error"] != "Session "+id+" not found" {
		t.Errorf("another conversation's session polled: %v", got)
	}
	if ss, _ := b.tool("process", map[string]any{"action": "list"})["sessions"].([]any); len(ss) != 0 {
		t.Errorf("another conversation's sessions listed: %v", ss)
	}
	a.tool("process", map[string]any{"action": "kill", "sessionId": id})

	// A named conversation keeps its scope across a restart.
	c1 := e.serveWith(t, nil, "harness", `{"conversationId":"conv-42"}`)
	if s := c1.scope(); s != "conv-42" {
		t.Errorf("conversationId conv-42: scope %q", s)
	}
	r = c1.tool("execute_command", map[string]any{"command": "echo kept", "description": "short output"})
	kept, _ := r["sessionId"].(string)
	c1.in.Close()
	c2 := e.serveWith(t, nil, "harness", `{"conversationId":"conv-42"}`)
	if got := c2.tool("process", map[string]any{"action": "poll", "sessionId": kept}); got["output"] != "kept\n" {
		t.Errorf("the same conversation after a restart: %v", got)
	}

	// JOBS_SCOPE wins; other profiles keep "default".
	if s := e.serveWith(t, []string{"JOBS_SCOPE=pinned"}, "harness", `{"conversationId":"conv-42"}`).scope(); s != "pinned" {
		t.Errorf("JOBS_SCOPE=pinned: scope %q", s)
	}
	if d := e.serveWith(t, []string{"JOBS_MCP_PROFILE=duragent"}, "harness", ""); !strings.Contains(d.instructions, `"default"`) {
		t.Errorf("duragent without JOBS_SCOPE: instructions %q do not name the scope default", d.instructions)
	}
}
