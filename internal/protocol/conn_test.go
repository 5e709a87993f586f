package protocol

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentjobs/jobs/internal/db"
)

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

// runtimeDir returns a fresh runtime directory path (not yet created),
// short enough for a unix socket address.
func runtimeDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run")
}
