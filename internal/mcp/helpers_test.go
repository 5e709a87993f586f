package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectInMemory serves NewServer(c) over in-memory transports and returns
// a connected client session.
func connectInMemory(t *testing.T, c *jobs.Client) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := NewServer(c, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("connect server: %v", err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("connect client: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	// Generous: a 16 MiB argument took over three minutes to refuse with
	// the race detector on one core shared by four test binaries.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v", tool, args, err)
	}
	return res
}

// callOK calls a tool, fails the test on any error, and decodes the
// structured result into T.
func callOK[T any](t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) T {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, text(res))
	}
	if len(res.Content) < 1 || res.StructuredContent == nil {
		t.Fatalf("%s %v: want a text line and structured content, got %d content blocks", tool, args, len(res.Content))
	}
	var v T
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("%s: encode structured content: %v", tool, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: decode structured content %s: %v", tool, data, err)
	}
	return v
}

// callErr calls a tool that must fail with a tool error containing want.
func callErr(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, want string) string {
	t.Helper()
	res := call(t, cs, tool, args)
	msg := text(res)
	if !res.IsError {
		t.Fatalf("%s %v: want a tool error containing %q, got success: %s", tool, args, want, msg)
	}
	if !strings.Contains(msg, want) {
		t.Fatalf("%s %v: error %q does not contain %q", tool, args, msg, want)
	}
	return msg
}

// text joins a result's text content.
func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// logPage is log's structured result as a test reads it: output_info
// holds the fields of an outputView (unit lines or bytes) or a charPage
// (unit chars).
type logPage struct {
	SessionID  string `json:"sessionId"`
	Status     string `json:"status"`
	Unit       string `json:"unit"`
	Output     string `json:"output"`
	OutputInfo struct {
		outputView
		Offset *int64 `json:"offset"`
		Chars  int64  `json:"chars"`
	} `json:"output_info"`
}
