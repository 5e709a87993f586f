package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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

// The supervisor EnsureDefault starts exits at once when another took
// default.lock first; that one may take longer than EnsureDefaultTimeout to
// answer on a loaded machine. While it holds the lock, EnsureDefault waits
// for it. (Several `jobs start` at once beside busy supervisors failed with
// "the supervisor started for it has exited" after 10.9 s.)
func TestEnsureDefaultWaitsForTheLockWinner(t *testing.T) {
	t.Parallel()
	rt := runtimeDir(t)
	if err := PrepareRuntimeDir(rt); err != nil {
		t.Fatal(err)
	}
	lock, err := LockFile(filepath.Join(rt, "default.lock")) // the winner: this process
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	type ensured struct {
		c   *Conn
		err error
	}
	res := make(chan ensured, 1)
	go func() {
		c, err := EnsureDefault(ctx, d, rt, truePath) // "supervisor" that exits at once, as a loser does
		res <- ensured{c, err}
	}()
	// Past the point where it used to give up, the winner starts answering.
	select {
	case r := <-res:
		t.Fatalf("EnsureDefault returned while the lock's holder was starting: %v", r.err)
	case <-time.After(EnsureDefaultTimeout + time.Second):
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
			go func() {
				defer conn.Close()
				dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
				for {
					var req Request
					if dec.Decode(&req) != nil {
						return
					}
					_ = enc.Encode(Response{Supervisor: "winner"})
				}
			}()
		}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("EnsureDefault: %v", r.err)
		}
		r.c.Close()
	case <-time.After(time.Minute):
		t.Fatal("EnsureDefault did not reach the winner within a minute of its answering")
	}
}

// A supervisor that answers the ping at once but reads a big request for
// longer than the ping's bound still gets it whole: the bound is the
// ping's, not the request's. (A 1 MiB write to a job's stdin failed with
// "i/o timeout" from a supervisor slow to read it on a loaded machine.)
func TestBigRequestOutlastsThePingBound(t *testing.T) {
	t.Parallel()
	for _, ahead := range []bool{false, true} {
		name := "dial"
		if ahead {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Long enough that a loaded machine still answers the ping
			// within it; the read then waits past it whatever the load.
			const bound = 2 * time.Second
			rt := runtimeDir(t)
			if err := os.MkdirAll(rt, 0o700); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(rt, "default.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			served := make(chan error, 1)
			go func() { served <- slowReader(l, 2*bound) }()

			ctx := context.Background()
			var c *Conn
			if ahead {
				c, err = DialDefault(ctx, filepath.Join(t.TempDir(), "unused.db"), rt)
			} else {
				c, err = Dial(ctx, sock)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.pingWithin = bound
			data := make([]byte, 1<<20) // many socket buffers
			n, err := c.Write(ctx, "j", data, false, 0)
			if err != nil || n != len(data) {
				t.Errorf("write of 1 MiB: %d, %v; want all of it", n, err)
			}
			c.Close()
			if err := <-served; err != nil {
				t.Error(err)
			}
		})
	}
}

// slowReader is a supervisor for one connection: it answers the ping, lets
// slow pass before it reads the request, and answers that with its size.
func slowReader(l net.Listener, slow time.Duration) error {
	conn, err := l.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	var ping Request
	if err := dec.Decode(&ping); err != nil || ping.Op != OpPing {
		return fmt.Errorf("first request: %+v, %v; want a ping", ping, err)
	}
	if err := enc.Encode(Response{Supervisor: "slow"}); err != nil {
		return err
	}
	<-time.After(slow) // slower than the ping's bound
	var req Request
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	return enc.Encode(Response{Written: len(req.Data)})
}
