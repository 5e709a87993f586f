package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/vocab"
)

// EnsureDefaultTimeout bounds how long EnsureDefault waits for a default
// supervisor to answer once the one it started has exited (it lost the
// race for default.lock to another, or failed; see its log).
const EnsureDefaultTimeout = 5 * time.Second

// EnsureDefaultPatience bounds how long EnsureDefault waits for the
// supervisor it started while that process lives: on a loaded machine
// opening the database and binding the socket can take many seconds, and a
// live supervisor that is still starting is not a failure.
const EnsureDefaultPatience = 2 * time.Minute

// Conn is a connection to a supervisor in another process. Its methods
// mirror the Supervisor's, with the same semantics and the same sentinel
// errors (errors.Is works across the socket). Calls on one Conn are
// serialised; it is safe for concurrent use.
type Conn struct {
	path string

	mu         sync.Mutex
	c          net.Conn
	dec        *json.Decoder
	enc        *json.Encoder
	broken     error
	supervisor string
	// unverified is set by Dial: nobody has answered on this
	// connection yet, so the first call is preceded by a ping, answered
	// within pingTimeout before the request is sent at all.
	unverified bool
	// ahead (DialDefault) sends the first request in the same write as
	// its ping, saving `jobs start` a round trip: a supervisor that hangs
	// up unanswered never read it (ErrNoAnswer), but one that does not
	// answer in time may still run it.
	ahead bool
	// pingWithin is the ping's bound: pingTimeout (shorter in tests).
	pingWithin time.Duration
}

// ErrNoAnswer means a connection from DialDefault broke before the
// supervisor answered the ping sent ahead of the first request: the
// supervisor never read that request (it handles a connection's requests in
// order), so the caller may send it again elsewhere.
var ErrNoAnswer = errors.New("supervisor did not answer")

// ErrHung means a supervisor accepted the connection but did not answer a
// ping within its bound (pingTimeout): it is stopped (SIGSTOP), hung or
// starved. It may still read the request later, so the caller must not
// send it again elsewhere; an action it can take without the supervisor
// (ending the job's processes) it takes directly.
var ErrHung = errors.New("supervisor does not answer")

// Dial connects to the supervisor listening on socketPath. The first call
// on the connection carries a ping ahead of its request, so a supervisor
// that does not answer is found out within pingTimeout (ErrHung), whatever
// the call's own deadline.
func Dial(ctx context.Context, socketPath string) (*Conn, error) {
	if err := checkSocket(socketPath); err != nil {
		return nil, fmt.Errorf("dial supervisor: %w", err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("dial supervisor: %w", err)
	}
	return &Conn{path: socketPath, c: c, dec: json.NewDecoder(c), enc: json.NewEncoder(c), unverified: true, pingWithin: pingTimeout}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// SocketPath returns the socket the Conn is connected to.
func (c *Conn) SocketPath() string { return c.path }

// SupervisorID returns the id of the supervisor, known after a Ping.
func (c *Conn) SupervisorID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.supervisor
}

// call sends req and reads its response. ctx's deadline and cancellation
// interrupt the exchange; the connection is then unusable, since an answer
// may still be on its way.
func (c *Conn) call(ctx context.Context, req Request) (Response, error) {
	return c.exchange(ctx, req, nil)
}

// exchange is call, and with undo set it is a call that must not be left
// half done: ctx's end interrupts it only until req is sent. From then on
// ctx's end sends undo after req (the supervisor takes a connection's
// requests in order, so undo finds whatever req did), both answers are
// read, within undoTimeout of ctx's end, and the error wraps ctx's.
func (c *Conn) exchange(ctx context.Context, req Request, undo *Request) (Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return Response{}, c.broken
	}
	req.CallerPID = os.Getpid()
	dl, _ := ctx.Deadline()
	if undo != nil {
		dl = time.Time{} // ctx's deadline is one more end of ctx: it sends undo
	}
	var body []byte // req encoded, when it follows a ping
	first := dl
	if c.unverified {
		// Before the ping's bound starts: encoding a big request takes a
		// while.
		b, err := json.Marshal(req)
		if err != nil {
			return Response{}, fmt.Errorf("call supervisor: %w", err)
		}
		body = append(b, '\n')
		if p := time.Now().Add(c.pingWithin); dl.IsZero() || p.Before(dl) {
			first = p
		}
	}
	c.c.SetDeadline(first)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.c.SetDeadline(time.Now())
		close(fired)
	})
	// halt ends ctx's interruption of the exchange, and reports whether
	// it came.
	halted, interrupted := false, false
	halt := func() bool {
		if !halted {
			halted = true
			if !stop() {
				<-fired
				interrupted = true
			}
		}
		return interrupted
	}
	defer halt()
	var err error
	pong := false // the answer to a ping sent ahead of req is still to read
	switch {
	case c.unverified:
		if c.ahead && len(body) <= aheadMax {
			err = c.sendAhead(req.CallerPID, body) // req goes with the ping
			pong = err == nil
			break
		}
		if err = c.pingAlone(req); err == nil {
			// The supervisor answers: the ping's bound is not the
			// request's, which may take it a while to read.
			c.c.SetDeadline(dl)
			if ctx.Err() != nil {
				c.c.SetDeadline(time.Now()) // as below
			}
			_, err = c.c.Write(body)
		}
	default:
		err = c.enc.Encode(req)
	}
	var resp Response
	switch {
	case err != nil:
	case undo != nil:
		return c.undoable(ctx, halt(), pong, first, *undo)
	default:
		if pong {
			err = c.readPong()
		}
		if err == nil && !first.Equal(dl) {
			c.c.SetDeadline(dl)
			if ctx.Err() != nil {
				// Cancelled meanwhile: the AfterFunc's deadline was
				// just overwritten, so set it again.
				c.c.SetDeadline(time.Now())
			}
		}
		if err == nil {
			err = c.dec.Decode(&resp)
		}
	}
	return c.finish(ctx, resp, err)
}

// finish is how a call ends once its answer is read (err: it was not).
func (c *Conn) finish(ctx context.Context, resp Response, err error) (Response, error) {
	if err != nil {
		return Response{}, c.fail(ctx, err)
	}
	if resp.Error != nil {
		return resp, resp.Error.Err()
	}
	return resp, nil
}

// fail marks the connection broken after err, and returns the error its
// call ends with.
func (c *Conn) fail(ctx context.Context, err error) error {
	c.broken = fmt.Errorf("supervisor connection %s: %w", c.path, err)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("call supervisor: %w", err)
}

// undoTimeout bounds the wait for the answers of a request and of its
// undo once ctx has ended (exchange).
const undoTimeout = 30 * time.Second

// undoable reads the answer to a request that was sent (after the answer
// to the ping sent ahead of it, when pong is set): ctx's end, or its end
// already (ended), sends undo, whose answer is read too. Before ctx ends
// the reads wait as long as the supervisor takes; the ping's answer
// within pingBound.
func (c *Conn) undoable(ctx context.Context, ended, pong bool, pingBound time.Time, undo Request) (Response, error) {
	var dmu sync.Mutex // the read deadline, which both goroutines set
	undone := false
	sent := make(chan error, 1)
	send := func() {
		dmu.Lock()
		defer dmu.Unlock()
		undone = true
		c.c.SetDeadline(time.Now().Add(undoTimeout))
		undo.CallerPID = os.Getpid()
		sent <- json.NewEncoder(c.c).Encode(undo)
	}
	if pong {
		c.c.SetDeadline(pingBound)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	stopUndo := func() bool { return false } // sent already
	if ended {
		send()
	} else {
		stopUndo = context.AfterFunc(ctx, send)
	}
	var err error
	if pong {
		if err = c.readPong(); err == nil {
			dmu.Lock()
			if !undone {
				c.c.SetDeadline(time.Time{})
			}
			dmu.Unlock()
		}
	}
	var resp Response
	if err == nil {
		err = c.dec.Decode(&resp)
	}
	var uerr error
	undid := !stopUndo()
	if undid {
		uerr = <-sent // the undo is written before the call ends
	}
	if !undid || err != nil {
		// ctx did not end (an exchange like any other), or the answer
		// never came (a connection broken, the undo's answer unread).
		return c.finish(ctx, resp, err)
	}
	var ur Response
	if uerr == nil {
		uerr = c.dec.Decode(&ur)
	}
	if uerr != nil {
		c.broken = fmt.Errorf("supervisor connection %s: %w", c.path, uerr)
	}
	switch {
	case resp.Error != nil:
		// req did nothing, so there was nothing to undo: its refusal is
		// the news.
		return resp, resp.Error.Err()
	case uerr != nil:
		return resp, fmt.Errorf("%w (undoing it did not complete: %v)", ctx.Err(), uerr)
	case ur.Error != nil:
		return resp, fmt.Errorf("%w (undoing it failed: %w)", ctx.Err(), ur.Error.Err())
	}
	return resp, ctx.Err()
}

// pingTimeout bounds the wait for a ping's answer: a supervisor that does
// not answer in that time is hung. A live one busy with fifty starts on a
// loaded machine took over 2 s to answer (A5), so the bound is generous.
const pingTimeout = 10 * time.Second

// aheadMax bounds a request sent in the same write as its ping. The write
// of a longer one lasts until the supervisor has read most of it, within
// the ping's bound: a supervisor slow to read a 1 MiB write on a loaded
// machine failed it. A longer request waits for the ping's answer.
const aheadMax = 64 << 10

// sendAhead writes a ping and body, the encoded request, in one write, so
// that an unverified connection costs no round trip of its own; readPong
// reads the ping's answer. When the supervisor hangs up before answering,
// it never read the request, and the error wraps ErrNoAnswer. When it does
// not answer within pingTimeout it may still read the request later, so
// that is an error the caller must not retry elsewhere.
func (c *Conn) sendAhead(callerPID int, body []byte) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(Request{Op: OpPing, CallerPID: callerPID}); err != nil {
		return err
	}
	buf.Write(body)
	if _, err := c.c.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	return nil
}

func (c *Conn) readPong() error {
	// An error in the ping's answer is still an answer: the supervisor
	// reads req next either way.
	var pong Response
	err := c.dec.Decode(&pong)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: no answer to a ping within %s: %w", ErrHung, c.pingWithin, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	c.unverified = false
	c.supervisor = pong.Supervisor
	return nil
}

// pingAlone sends a ping and reads its answer within pingTimeout; req is
// sent only after it. A supervisor that does not answer in time then
// never gets the request: ErrHung, with nothing done.
func (c *Conn) pingAlone(req Request) error {
	var pong Response
	err := c.enc.Encode(Request{Op: OpPing, CallerPID: req.CallerPID})
	if err == nil {
		err = c.dec.Decode(&pong)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: no answer to a ping within %s: %w", ErrHung, c.pingWithin, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	c.supervisor = pong.Supervisor
	return nil
}

// Ping checks that the supervisor answers, and learns its id.
func (c *Conn) Ping(ctx context.Context) error {
	resp, err := c.call(ctx, Request{Op: OpPing})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.supervisor = resp.Supervisor
	c.mu.Unlock()
	return nil
}

// Start is Supervisor.Start in the supervisor's process. The request is
// as pkg/jobs normalised it (an absolute, existing Cwd); a nil BaseEnv is
// the caller's environment, so the job runs as the caller would run it.
// When ctx ends once the request is on its way, the job is killed (a kill
// follows the request) and returned with an error wrapping ctx's: no job
// runs that its caller never heard of.
func (c *Conn) Start(ctx context.Context, req StartRequest) (db.Job, error) {
	if req.BaseEnv == nil {
		req.BaseEnv = os.Environ()
	}
	if req.Job.ID == "" {
		// Ours, so that a kill can follow the request before its answer.
		req.Job.ID = db.NewID()
	}
	resp, err := c.exchange(ctx, Request{Op: OpStart, Start: &req}, &Request{Op: OpKill, JobID: req.Job.ID})
	var job db.Job
	if resp.Job != nil {
		job = *resp.Job
	}
	return job, err
}

// Write is Supervisor.Write in the supervisor's process.
func (c *Conn) Write(ctx context.Context, jobID string, data []byte, eof bool, idle time.Duration) (int, error) {
	resp, err := c.call(ctx, Request{Op: OpWrite, JobID: jobID, Data: data, EOF: eof, Idle: idle})
	return resp.Written, err
}

// CloseStdin closes the job's stdin: Write with no data and eof.
func (c *Conn) CloseStdin(ctx context.Context, jobID string) error {
	_, err := c.call(ctx, Request{Op: OpCloseStdin, JobID: jobID})
	return err
}

// Kill is Supervisor.Kill in the supervisor's process.
func (c *Conn) Kill(ctx context.Context, jobID string, grace time.Duration) (vocab.KillResult, error) {
	resp, err := c.call(ctx, Request{Op: OpKill, JobID: jobID, Grace: grace})
	var res vocab.KillResult
	if resp.Kill != nil {
		res = *resp.Kill
	}
	return res, err
}

// Signal is Supervisor.Signal in the supervisor's process.
func (c *Conn) Signal(ctx context.Context, jobID string, sig string) ([]int, error) {
	resp, err := c.call(ctx, Request{Op: OpSignal, JobID: jobID, Signal: sig})
	return resp.PIDs, err
}

// SendKeys is Supervisor.SendKeys in the supervisor's process.
func (c *Conn) SendKeys(ctx context.Context, jobID string, keys []string, literal bool) error {
	_, err := c.call(ctx, Request{Op: OpSendKeys, JobID: jobID, Keys: keys, Literal: literal})
	return err
}

// Flush is Supervisor.Flush in the supervisor's process.
func (c *Conn) Flush(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpFlush})
	return err
}

// Sync is Supervisor.Sync in the supervisor's process. A supervisor older
// than this op answers it with an invalid-request error.
func (c *Conn) Sync(ctx context.Context, jobID string) error {
	_, err := c.call(ctx, Request{Op: OpSync, JobID: jobID})
	return err
}

// EnsureDefault returns a connection to the default supervisor of d,
// starting one when none answers: `executable supervise --db PATH` (plus
// `--runtime-dir DIR` when runtimeDir is not the default one), in a new
// session, with stdin on /dev/null, stdout and stderr appended to
// <runtime>/supervise.log and its working directory at /, not
// waited for, so that it outlives the caller. It then waits for default.sock to answer: while the process it
// started lives (up to EnsureDefaultPatience), and EnsureDefaultTimeout
// once that process has exited. Callers racing here are
// fine: only one supervisor wins default.lock, the others exit, and all
// callers reach the winner. runtimeDir "" means DefaultRuntimeDir(d.Path);
// executable "" means os.Executable().
func EnsureDefault(ctx context.Context, d *db.DB, runtimeDir, executable string) (*Conn, error) {
	def := DefaultRuntimeDir(d.Path)
	if runtimeDir == "" {
		runtimeDir = def
	}
	sock := filepath.Join(runtimeDir, "default.sock")
	if c, err := dialPing(ctx, sock); err == nil {
		return c, nil
	}
	// Say so at once when something was planted on the way, rather than
	// starting a supervisor that will refuse it too and timing out.
	if err := checkRuntimeDir(runtimeDir); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	if err := checkSocket(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	if err := checkLock(filepath.Join(runtimeDir, "default.lock")); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	if executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("start supervisor: %w", err)
		}
		executable = exe
	}
	args := []string{"supervise", "--db", d.Path}
	if runtimeDir != def {
		args = append(args, "--runtime-dir", runtimeDir)
	}
	// The supervisor's own directory, made and checked as it will, so
	// that its log has a place: its stdio must be neither the caller's
	// terminal nor the caller's pipes, which close when the caller exits
	// (a later log line would then kill it with SIGPIPE).
	if err := PrepareRuntimeDir(runtimeDir); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	logFile, err := openSupervisorLog(filepath.Join(runtimeDir, SupervisorLogName))
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(executable, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = "/"
	// The supervisor is not part of the caller's job: JOBS_ID would make
	// a kill of the caller's job end it, and every job it owns.
	cmd.Env = withoutEnv(os.Environ(), EnvJobID)
	// A new session: no controlling terminal, not in the caller's
	// process group, so ^C or a kill of the caller's group misses it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	// Not waited for: it outlives us. (If it loses the race for
	// default.lock it exits at once; the short-lived CLI does not mind
	// the zombie, and a subreaper's Reaper collects it.)
	pid := cmd.Process.Pid
	started, inspectErr := proc.Inspect(pid)
	cmd.Process.Release()
	starting := func() bool { return inspectErr == nil && proc.Alive(pid, started.StartTime) }

	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, EnsureDefaultPatience)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		c, err := dialPing(ctx, sock)
		if err == nil {
			return c, nil
		}
		lastErr = err
		waited := time.Since(began)
		if waited > EnsureDefaultTimeout && !starting() && !defaultLockHeld(runtimeDir) {
			return nil, fmt.Errorf("start supervisor: no answer on %s after %s, and the supervisor started for it has exited (see %s): %w",
				sock, waited.Round(time.Millisecond), filepath.Join(runtimeDir, SupervisorLogName), lastErr)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start supervisor: no answer on %s after %s: %w", sock, waited.Round(time.Millisecond), lastErr)
		case <-tick.C:
		}
	}
}

// defaultLockHeld reports whether a supervisor holds runtimeDir's
// default.lock: the one that won the race for it against the supervisor
// EnsureDefault started, still starting when ours has exited already (on a
// loaded machine that start took over five seconds).
func defaultLockHeld(runtimeDir string) bool {
	held, _ := lockHeld(filepath.Join(runtimeDir, "default.lock"))
	return held
}

// DialDefault connects to the default supervisor of the database at dbPath
// (runtimeDir "" means DefaultRuntimeDir(dbPath)) without starting one and
// without opening the database. It does not wait for an answer either: the
// first call on the Conn sends a ping in the same write as its request and
// fails with ErrNoAnswer when that ping is not answered, in which case the
// request was not run and EnsureDefault is the way on. This spares `jobs
// start` a round trip to a warm supervisor.
func DialDefault(ctx context.Context, dbPath, runtimeDir string) (*Conn, error) {
	if runtimeDir == "" {
		runtimeDir = DefaultRuntimeDir(dbPath)
	}
	c, err := Dial(ctx, filepath.Join(runtimeDir, "default.sock"))
	if err != nil {
		return nil, err
	}
	c.ahead = true
	return c, nil
}

// dialPing dials sock and pings it.
func dialPing(ctx context.Context, sock string) (*Conn, error) {
	c, err := Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}
