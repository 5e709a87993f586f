package ui

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// serve starts a server on a fresh database and returns it and its URL.
func serve(t *testing.T) (*Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := jobs.Open(ctx, jobs.Options{DB: filepath.Join(t.TempDir(), "jobs.db"), Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Client: c}, ln)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		c.Close()
	})
	return s, "http://" + ln.Addr().String() + "/" + s.Token() + "/"
}

// TestStreamLooksOnceASecondWhileIdle: an open list stream reads the
// database once a second while nothing changes, not in a loop.
func TestStreamLooksOnceASecondWhileIdle(t *testing.T) {
	s, u := serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u+"list.sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("list.sse: %s", resp.Status)
	}
	// The first event is sent before the first look.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: rows") {
	}
	// It keeps looking: a stream that stopped would show a stale list
	// for ever (and pass the bound below).
	before := s.looks.Load()
	testwait.For(t, 30*time.Second, "the idle stream to look again", func() bool { return s.looks.Load() > before })
	const idle = 3 * time.Second
	before = s.looks.Load()
	time.Sleep(idle) // the measure is what happens in this window, nothing to wait for
	looks := s.looks.Load() - before
	if looks > int64(idle/time.Second)+1 {
		t.Fatalf("%d looks in %v of an idle stream, want about one a second", looks, idle)
	}
	t.Logf("%d looks in %v idle", looks, idle)
}
