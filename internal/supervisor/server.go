package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/startstop"
	"github.com/agentjobs/jobs/internal/vocab"
)

// server is the service that answers the supervisor's sockets: an
// acceptor goroutine per listener (the addresses service listens), and a
// handler goroutine per connection, which answers its requests in order.
type server struct {
	startstop.Base
	s *Supervisor

	mu    sync.Mutex
	conns map[net.Conn]bool // true while a request runs on it
}

// answerGrace bounds how long Stop lets a request under way write its
// answer.
const answerGrace = 5 * time.Second

func newServer(s *Supervisor) *server {
	return &server{s: s, conns: map[net.Conn]bool{}}
}

// Start serves the sockets the addresses service listens on.
func (v *server) Start(ctx context.Context) error {
	v.Init(ctx)
	for _, l := range v.s.addr.listeners() {
		v.serve(l)
	}
	return nil
}

// Stop ends the acceptors (their listeners are closed by then: see
// Supervisor.shutdown) and every connection, and waits for their
// goroutines. A connection waiting for a request is closed at once; a
// request under way sees its context cancelled and still writes its
// answer (within answerGrace), then its connection is closed. The request
// that made the supervisor exit is one: a start that found the database
// file replaced, when no job was left to finish, got a closed connection
// instead of its refusal.
func (v *server) Stop() error {
	v.mu.Lock()
	conns := v.conns
	v.conns = nil // no connection is taken from now on
	v.mu.Unlock()
	for c, busy := range conns {
		if busy {
			c.SetDeadline(time.Now().Add(answerGrace))
			continue
		}
		c.Close()
	}
	v.Halt()
	return nil
}

// busy marks conn as running a request (or done with it) and reports
// whether the server still serves it: false once Stop began, when the
// request must not run.
func (v *server) busy(conn net.Conn, running bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conns == nil {
		return false
	}
	v.conns[conn] = running
	return true
}

// serve starts an acceptor on l, and reports whether it did (not once the
// server stops).
func (v *server) serve(l net.Listener) bool {
	return v.Go(func(ctx context.Context) { v.accept(ctx, l) })
}

// accept accepts connections on l until l is closed or the server stops.
func (v *server) accept(ctx context.Context, l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// A retired listener answered what reached it.
				l.Close()
				return
			}
			v.s.logf("accept: %v", err)
			// A persistent error (out of file descriptors) must not spin.
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		v.mu.Lock()
		if v.conns == nil || ctx.Err() != nil {
			v.mu.Unlock()
			conn.Close()
			return
		}
		v.conns[conn] = false
		ok := v.Go(func(ctx context.Context) { v.handleConn(ctx, conn) })
		v.mu.Unlock()
		if !ok {
			conn.Close()
			return
		}
	}
}

// handleConn answers the requests of one connection in order until the
// client hangs up or Stop closes the connection.
func (v *server) handleConn(ctx context.Context, conn net.Conn) {
	s := v.s
	defer func() {
		v.mu.Lock()
		delete(v.conns, conn)
		v.mu.Unlock()
		conn.Close()
	}()
	enc := json.NewEncoder(conn)
	if err := checkPeer(conn); err != nil {
		s.logf("refused a connection: %v", err)
		enc.Encode(protocol.Response{Error: vocab.EncodeError(err)})
		return
	}
	dec := json.NewDecoder(conn)
	for {
		var req protocol.Request
		if err := dec.Decode(&req); err != nil {
			var syntax *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if errors.As(err, &syntax) || errors.As(err, &typ) {
				enc.Encode(protocol.Response{Error: vocab.EncodeError(invalid(fmt.Errorf("malformed request: %v", err)))})
			}
			return
		}
		if !v.busy(conn, true) {
			return // Stop closed it, or is about to
		}
		ctx := ctx
		watched := req.Op == protocol.OpWrite
		var stop func() bool
		if watched {
			// A write may block for as long as the job does not read:
			// it must end when its client goes away.
			ctx, stop = untilHangup(ctx, conn)
		}
		resp := v.handle(ctx, req)
		if watched && !stop() {
			return // gone, or it broke the protocol by sending meanwhile
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
		if !v.busy(conn, false) {
			return
		}
	}
}

// untilHangup returns a context that ends when the client hangs up while
// its request runs. A client sends nothing while it waits for an answer,
// so a read that returns means it is gone (or broke the protocol). stop
// ends the watch and reports whether the connection is still usable.
func untilHangup(parent context.Context, conn net.Conn) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(parent)
	gone := make(chan bool, 1)
	go func() {
		var b [1]byte
		_, err := conn.Read(b[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			gone <- false // stopped by stop, below
			return
		}
		cancel()
		gone <- true
	}()
	return ctx, func() bool {
		conn.SetReadDeadline(time.Now())
		g := <-gone
		conn.SetReadDeadline(time.Time{})
		cancel()
		return !g
	}
}

// checkPeer lets in only processes of the supervisor's own user, whatever
// the modes of the socket and its directory say: a request runs commands
// as that user, so a mode loosened by mistake must not hand that power to
// another user (root included, which file modes do not stop).
func checkPeer(conn net.Conn) error {
	uid, pid, err := peerCred(conn)
	if err != nil {
		return fmt.Errorf("%w: %w", vocab.ErrPermission, err)
	}
	if uid != os.Geteuid() {
		return fmt.Errorf("%w: uid %d (pid %d) is not the supervisor's user (uid %d)", vocab.ErrPermission, uid, pid, os.Geteuid())
	}
	return nil
}

// handle runs one request. A panic becomes an error answer: one bad
// request must not take down a supervisor and orphan every job.
func (v *server) handle(ctx context.Context, req protocol.Request) (resp protocol.Response) {
	s := v.s
	defer func() {
		if r := recover(); r != nil {
			s.logf("request %s panicked: %v\n%s", req.Op, r, debug.Stack())
			resp = protocol.Response{Error: &vocab.WireError{Code: "error", Message: fmt.Sprintf("supervisor: internal error in %s: %v", req.Op, r)}}
		}
	}()
	ctx = control.WithCaller(ctx, req.CallerPID)
	var err error
	switch req.Op {
	case protocol.OpPing:
		resp.Supervisor, resp.PID = s.id, os.Getpid()
	case protocol.OpStart:
		if req.Start == nil {
			err = invalid(errors.New("start: no job"))
			break
		}
		job, serr := s.Start(ctx, *req.Start)
		if serr == nil || job.ID != "" {
			resp.Job = &job
		}
		err = serr
	case protocol.OpWrite:
		resp.Written, err = s.Write(ctx, req.JobID, req.Data, req.EOF, req.Idle)
	case protocol.OpCloseStdin:
		_, err = s.Write(ctx, req.JobID, nil, true, 0)
	case protocol.OpKill:
		var res vocab.KillResult
		res, err = s.Kill(ctx, req.JobID, req.Grace)
		resp.Kill = &res
	case protocol.OpSignal:
		resp.PIDs, err = s.Signal(ctx, req.JobID, req.Signal)
	case protocol.OpSendKeys:
		err = s.SendKeys(ctx, req.JobID, req.Keys, req.Literal)
	case protocol.OpFlush:
		err = s.Flush(ctx)
	case protocol.OpSync:
		err = s.Sync(ctx, req.JobID)
	default:
		err = invalid(fmt.Errorf("unknown op %q", req.Op))
	}
	resp.Error = vocab.EncodeError(err)
	return resp
}
