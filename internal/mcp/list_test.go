package mcp

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestListPagesHistory: list returns the newest 20 sessions of a long
// history and how many more there are, takes a limit up to 100, the
// filters, and a cursor that continues where the page ended.
func TestListPagesHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	err = dbtest.Fill(ctx, d, dbtest.History{Scope: "agent", Jobs: 250, End: time.Now().Add(-time.Hour)})
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := connectInMemory(t, c)
	id := start(t, cs, "sleep 300", map[string]any{"name": "srv_1", "label": "web 100%"})

	l := callOK[listResult](t, cs, "process", map[string]any{"action": "list"})
	// The documents' list shows all sessions: the default is the bound.
	if len(l.Sessions) != 100 || l.More != 151 || l.NextCursor == "" || l.Sessions[0].SessionID != id {
		t.Fatalf("default list: %d sessions, more %d, cursor %q, first %+v", len(l.Sessions), l.More, l.NextCursor, l.Sessions[0])
	}
	seen := map[string]bool{}
	for _, s := range l.Sessions {
		seen[s.SessionID] = true
	}
	next := callOK[listResult](t, cs, "process", map[string]any{"action": "list", "cursor": l.NextCursor, "limit": 100})
	if len(next.Sessions) != 100 || next.More != 51 {
		t.Errorf("second page: %d sessions, more %d", len(next.Sessions), next.More)
	}
	for _, s := range next.Sessions {
		if seen[s.SessionID] {
			t.Errorf("session %s on both pages", s.SessionID)
		}
	}
	for _, c := range []struct {
		args map[string]any
		want int
	}{
		{map[string]any{"status": "running"}, 1},
		{map[string]any{"status": "finished", "limit": 100}, 100},
		{map[string]any{"name": "srv_"}, 1},
		{map[string]any{"name": "srv%"}, 0},
		{map[string]any{"label": "100%"}, 1},
		{map[string]any{"command": "sleep"}, 1},
		{map[string]any{"since": 60}, 1},
	} {
		c.args["action"] = "list"
		if got := callOK[listResult](t, cs, "process", c.args); len(got.Sessions) != c.want {
			t.Errorf("list %v: %d sessions, want %d", c.args, len(got.Sessions), c.want)
		}
	}
	callErr(t, cs, "process", map[string]any{"action": "list", "limit": 101}, "limit must be 1 to 100")
	callErr(t, cs, "process", map[string]any{"action": "list", "limit": 0}, "limit must be 1 to 100")
	callErr(t, cs, "process", map[string]any{"action": "list", "status": "asleep"}, "unknown status")
	callErr(t, cs, "process", map[string]any{"action": "list", "cursor": "nope"}, "bad cursor")
	callErr(t, cs, "process", map[string]any{"action": "list", "since": -1}, "since must be a positive")
	if _, err := c.Kill(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
}
