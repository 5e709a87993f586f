package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// noticeRecorder is a client's record of the notices it got.
type noticeRecorder struct {
	mu   sync.Mutex
	logs []string
}

func (n *noticeRecorder) completions(id string) int {
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

// noticeClient connects a client to srv over in-memory transports.
func noticeClient(t *testing.T, srv *sdk.Server) (*sdk.ClientSession, *noticeRecorder) {
	t.Helper()
	n := &noticeRecorder{}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatalf("connect server: %v", err)
	}
	cl := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, &sdk.ClientOptions{
		//lint:ignore SA1019 the completion message is a logging notification
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if s, ok := r.Params.Data.(string); ok {
				n.logs = append(n.logs, s)
			}
		},
	})
	cs, err := cl.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatalf("connect client: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs, n
}

// setLevel sets cs's logging level.
func setLevel(t *testing.T, cs *sdk.ClientSession, level string) {
	t.Helper()
	//lint:ignore SA1019 Duragent's completion message is a logging notification
	if err := cs.SetLoggingLevel(t.Context(), &sdk.SetLoggingLevelParams{Level: sdk.LoggingLevel(level)}); err != nil {
		t.Fatalf("set logging level %s: %v", level, err)
	}
}

// deliveryNotes counts the delivery notes on job id's audit trail.
func deliveryNotes(t *testing.T, c *jobs.Client, id string) int {
	t.Helper()
	evs, err := c.History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		var d struct{ Message string }
		if e.Kind == "note" && json.Unmarshal(e.Detail, &d) == nil && d.Message == noticeNote {
			n++
		}
	}
	return n
}

// TestNoticeDeliveredOnlyWhenSent: a completion message that no client
// received, because none set a logging level or the level it set is above
// info, is not recorded as delivered; it stays pending, and the first
// client that sets a level taking info gets it, once, and the note is
// written then.
func TestNoticeDeliveredOnlyWhenSent(t *testing.T) {
	t.Parallel()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: t.TempDir() + "/jobs.db", Scope: "notices"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, n, err := newProfileServer(c, "test", "duragent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, qn := noticeClient(t, srv) // never sets a level
	strict, sn := noticeClient(t, srv)
	setLevel(t, strict, "error")
	// end runs a quick job to its end and has the server announce it, as
	// its announce loop does when it reads the end on the audit trail.
	end := func(command string) string {
		t.Helper()
		j, err := c.Start(t.Context(), jobs.Spec{Command: command, Label: "quick"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(t.Context(), []string{j.ID}, jobs.WaitOptions{Timeout: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
		n.ended(t.Context(), j.ID)
		return j.ID
	}
	first, second := end("echo first"), end("echo second")
	for _, id := range []string{first, second} {
		if got := deliveryNotes(t, c, id); got != 0 {
			t.Errorf("%d delivery notes for %s, which no client received", got, id)
		}
		if qn.completions(id)+sn.completions(id) != 0 {
			t.Errorf("a client without an info level got the completion message of %s", id)
		}
	}

	// A client that takes info gets the pending ends once, when it sets
	// its level; then the note is written.
	late, ln := noticeClient(t, srv)
	setLevel(t, late, "info")
	for _, id := range []string{first, second} {
		waitFor(t, "the pending completion message of "+id, 10*time.Second, func() bool { return ln.completions(id) > 0 })
	}
	// Told live, to it alone; told again (the announce and a second
	// setLevel), not repeated.
	third := end("echo third")
	waitFor(t, "the live completion message of "+third, 10*time.Second, func() bool { return ln.completions(third) > 0 })
	n.ended(t.Context(), third)
	setLevel(t, late, "debug")
	// A job ended after these, told live, orders after anything late.
	fourth := end("echo fourth")
	waitFor(t, "the live completion message of "+fourth, 10*time.Second, func() bool { return ln.completions(fourth) > 0 })
	for _, id := range []string{first, second, third} {
		if got := ln.completions(id); got != 1 {
			t.Errorf("%s told %d times, want once", id, got)
		}
		if got := deliveryNotes(t, c, id); got != 1 {
			t.Errorf("%s: %d delivery notes after it was told, want 1", id, got)
		}
		if qn.completions(id)+sn.completions(id) != 0 {
			t.Errorf("a client without an info level got the completion message of %s", id)
		}
	}
}

// TestAnnounceSkipsHistory: a server announces the ends from its start on
// without reading the audit trail before it: on a scope with a long
// history it runs a few reads of the events, not one per 500 of them.
func TestAnnounceSkipsHistory(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	const history = 5000 * 5
	err = dbtest.Fill(ctx, d, dbtest.History{Scope: "notices", Jobs: 5000, Events: 5, End: time.Now().Add(-time.Hour)})
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "notices"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, n, err := newProfileServer(c, "test", "duragent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cs, rec := noticeClient(t, srv)
	setLevel(t, cs, "info")

	var reads atomic.Int64
	stop := db.TraceQueries(func(q string) {
		if strings.Contains(q, "FROM events WHERE id > ?") {
			reads.Add(1)
		}
	})
	defer stop()
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.announce(actx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	j, err := c.Start(ctx, jobs.Spec{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the announced end of "+j.ID, 20*time.Second, func() bool { return rec.completions(j.ID) > 0 })
	// Paging through the scope's history, 500 events a read, takes 50
	// reads; following from the server's start takes one a look, and a
	// loaded machine takes more looks before the job ends: the bound is
	// the page-through's, not a look count.
	got := reads.Load()
	if got >= history/500 {
		t.Errorf("announce read the events %d times to reach a job's end on a scope of %d events", got, history)
	}
	t.Logf("announce read the events %d times to reach a job's end on a scope of %d events", got, history)
}
