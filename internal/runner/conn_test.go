package runner

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

// A connection from DialDefault sends its ping ahead of the first request:
// a supervisor answers both, in order.
func TestDialDefaultPingsAhead(t *testing.T) {
	t.Parallel()
	rt := runtimeDir(t)
	s := startSupervisor(t, Config{RuntimeDir: rt, Default: true})
	ctx := context.Background()
	c, err := DialDefault(ctx, filepath.Join(t.TempDir(), "unused.db"), rt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job, err := c.Start(ctx, StartRequest{Job: db.NewJob{Command: "echo ahead"}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != vocab.StatusRunning && !job.Status.Terminal() || c.SupervisorID() != s.ID() {
		t.Errorf("job %s, supervisor %q; want it started by %s", job.Status, c.SupervisorID(), s.ID())
	}
	waitDone(t, s.db, job.ID, 5*time.Second)
	if got := string(output(t, s.db, job.ID, "")); got != "ahead\n" {
		t.Errorf("output = %q", got)
	}
	// Later calls on the same connection need no ping.
	if err := c.Ping(ctx); err != nil {
		t.Error(err)
	}
}

// A socket that hangs up without answering gives ErrNoAnswer: the request
// was not run, so the caller may start a supervisor and send it again.
func TestDialDefaultNoAnswer(t *testing.T) {
	t.Parallel()
	rt := runtimeDir(t)
	if err := os.MkdirAll(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(rt, "default.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	ctx := context.Background()
	c, err := DialDefault(ctx, filepath.Join(t.TempDir(), "unused.db"), rt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Start(ctx, StartRequest{Job: db.NewJob{Command: "true"}})
	if !errors.Is(err, ErrNoAnswer) {
		t.Errorf("start on a silent socket: %v, want ErrNoAnswer", err)
	}
}

// A socket that takes the request and never answers is a hung supervisor,
// which may still run the request later: not ErrNoAnswer, so the caller
// does not start the job elsewhere too.
func TestDialDefaultHungSupervisor(t *testing.T) {
	t.Parallel()
	rt := runtimeDir(t)
	if err := os.MkdirAll(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(rt, "default.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		if conn, err := l.Accept(); err == nil {
			held <- conn
		}
	}()
	defer func() {
		select {
		case conn := <-held:
			conn.Close()
		default:
		}
	}()
	ctx := context.Background()
	c, err := DialDefault(ctx, filepath.Join(t.TempDir(), "unused.db"), rt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Start(ctx, StartRequest{Job: db.NewJob{Command: "true"}})
	if err == nil || errors.Is(err, ErrNoAnswer) {
		t.Errorf("start on a hung socket: %v, want an error that is not ErrNoAnswer", err)
	}
}
