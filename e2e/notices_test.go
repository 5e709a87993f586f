package e2e

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// noticeClient is one client of `jobs mcp` that records the notices it
// gets: resource updates and logging messages, with when they came.
type noticeClient struct {
	cs      *sdk.ClientSession
	mu      sync.Mutex
	updated map[string][]time.Time
	logs    []string
}

func (w *world) noticeClient(profile string) *noticeClient {
	w.t.Helper()
	n := &noticeClient{updated: map[string][]time.Time{}}
	cmd := exec.Command(jobsBin, "mcp", "--profile", profile)
	cmd.Env = w.mcpEnviron()
	cl := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.updated[r.Params.URI] = append(n.updated[r.Params.URI], time.Now())
		},
		//lint:ignore SA1019 the completion message is a logging notification
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if s, ok := r.Params.Data.(string); ok {
				n.logs = append(n.logs, s)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		w.t.Fatalf("connect to jobs mcp: %v", err)
	}
	w.t.Cleanup(func() { cs.Close() })
	//lint:ignore SA1019 the completion message is a logging notification
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		w.t.Fatalf("set logging level: %v", err)
	}
	n.cs = cs
	return n
}

// completions counts the completion messages naming job id.
func (n *noticeClient) completions(id string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, l := range n.logs {
		if strings.HasPrefix(l, "[Background Process Completed]\n\nHandle: "+id+"\n") {
			c++
		}
	}
	return c
}

func (n *noticeClient) lastUpdate(uri string) (time.Time, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := n.updated[uri]
	if len(u) == 0 {
		return time.Time{}, 0
	}
	return u[len(u)-1], len(u)
}

// TestNoticeSubscribedWithinASecond: a client subscribed to jobs://ID is
// told of the job's end within 1 s, and every connected client of the
// scope, under any profile, gets Duragent's completion message once.
func TestNoticeSubscribedWithinASecond(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.scope = "notices"
	a := w.noticeClient("duragent")
	b := w.noticeClient("claude-code")
	id := w.start("--label", "nightly", "--", "sh", "-c", "echo compiled; sleep 300")
	uri := "jobs://" + id
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
	w.waitOutput(id, "compiled")
	_, before := a.lastUpdate(uri)
	w.ok("kill", id)
	ended := time.Now()
	waitFor(t, 60*time.Second, "the update after the kill", func() bool { _, n := a.lastUpdate(uri); return n > before })
	at, _ := a.lastUpdate(uri)
	lag := at.Sub(ended)
	res, err := a.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"status":"killed"`) {
		t.Errorf("read %s: %v %+v", uri, err, res)
	}
	for name, c := range map[string]*noticeClient{"duragent": a, "claude-code": b} {
		waitFor(t, 30*time.Second, name+"'s completion message", func() bool { return c.completions(id) > 0 })
	}
	// Give a duplicate the time to come, then count.
	w.ok("wait", "--timeout", "1s", w.start("--", "true"))
	for name, c := range map[string]*noticeClient{"duragent": a, "claude-code": b} {
		if n := c.completions(id); n != 1 {
			t.Errorf("%s got %d completion messages for %s, want 1", name, n, id)
		}
	}
	a.mu.Lock()
	c := a.logs[0]
	a.mu.Unlock()
	for _, want := range []string{"Label: nightly", "Command: ", "Exit code: ", "Duration: ", "Output (last 2000 chars):\ncompiled"} {
		if !strings.Contains(c, want) {
			t.Errorf("completion message lacks %q:\n%s", want, c)
		}
	}
	t.Logf("end notified %v after kill returned; each of 2 servers' clients got 1 completion message", lag.Round(time.Millisecond))
}

// TestNoticeEndedWhileNoServer: a job that ended while no server ran is
// told once to the scope, when the next servers start: of two servers of
// the scope, exactly one client gets its completion message, and a third
// server's client gets none.
func TestNoticeEndedWhileNoServer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.scope = "notices-backlog"
	id := w.start("--", "sh", "-c", "echo finished alone; exit 5")
	w.waitTerminal(id, 10*time.Second)
	a := w.noticeClient("duragent")
	b := w.noticeClient("openclaw")
	waitFor(t, 30*time.Second, "a completion message", func() bool { return a.completions(id)+b.completions(id) > 0 })
	c := w.noticeClient("macos-shell")
	// A later job's end, seen live by all three, orders after any late
	// backlog notice on each connection.
	later := w.start("--", "true")
	for name, n := range map[string]*noticeClient{"a": a, "b": b, "c": c} {
		waitFor(t, 30*time.Second, name+"'s live notice of "+later, func() bool { return n.completions(later) == 1 })
	}
	if got := a.completions(id) + b.completions(id) + c.completions(id); got != 1 {
		t.Errorf("%d completion messages for %s, which ended while no server ran; want exactly 1", got, id)
	}
	_, events := w.status(id)
	notes := 0
	for _, e := range events {
		if e.Kind == "note" && strings.Contains(string(e.Detail), "completion notice delivered") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("%d delivery notes on %s's audit trail, want 1", notes, id)
	}
	t.Logf("ended while no server ran: %d completion message(s) across 3 servers of the scope; %d delivery note(s)", a.completions(id)+b.completions(id)+c.completions(id), notes)
}
