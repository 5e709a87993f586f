package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Write writes data to the job's stdin and, with eof, closes it (the job
// reads end of file). It returns how many bytes of data the job took. A job
// that takes none of the rest for idle makes it give up with
// vocab.ErrNotReading (idle 0: it waits as long as ctx lets it); the count says
// what was taken before. An eof is carried out even then, and even while
// another write to the same job is blocked (that write then ends with
// vocab.ErrStdinClosed): closing never waits for the job to read. A job of
// another live supervisor is written through that supervisor. Errors:
// vocab.ErrNotFound, vocab.ErrNotRunning (finished), vocab.ErrStdinClosed (closed
// before, never a pipe, or closed by the job), vocab.ErrNotReading.
func (s *Supervisor) Write(ctx context.Context, jobID string, data []byte, eof bool, idle time.Duration) (int, error) {
	c := s.runners.child(jobID)
	if c == nil {
		job, err := s.db.FindJobByID(ctx, jobID)
		if err != nil {
			return 0, fmt.Errorf("write job %s: %w", jobID, err)
		}
		if job.Status.Terminal() {
			return 0, fmt.Errorf("write job %s: %w", jobID, vocab.ErrNotRunning)
		}
		if job.Mode == vocab.ModeTmux {
			if err := tmuxjob.Write(job, data, eof); err != nil { // types into the pane: tmux.go
				return 0, err
			}
			return len(data), nil
		}
		if job.Stdin != vocab.StdinPipe {
			return 0, fmt.Errorf("write job %s: %w", jobID, vocab.ErrStdinClosed)
		}
		conn, err := s.owner(ctx, job)
		if err != nil {
			return 0, fmt.Errorf("write job %s: %w", jobID, err)
		}
		if conn == nil {
			return 0, fmt.Errorf("write job %s: %w", jobID, vocab.ErrNotRunning)
		}
		defer conn.Close()
		return conn.Write(ctx, jobID, data, eof, idle)
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var n int
	var err error
	if len(data) > 0 || !eof {
		n, err = s.runners.writeChild(ctx, c, data, idle)
	}
	if eof && (err == nil || errors.Is(err, vocab.ErrNotReading)) {
		if cerr := s.runners.closeChildStdin(ctx, c); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		return n, fmt.Errorf("write job %s: %w", jobID, err)
	}
	return n, nil
}

// writeChild writes data to c's stdin, one writer at a time.
func (r *runners) writeChild(ctx context.Context, c *child, data []byte, idle time.Duration) (int, error) {
	if len(data) == 0 {
		return 0, c.stdinState()
	}
	if err := c.takeStdinTurn(ctx, idle); err != nil {
		return 0, err
	}
	defer func() { <-c.stdinTurn }()
	f, err := c.stdinFile()
	if err != nil {
		return 0, err
	}
	n, err := writeIdle(ctx, f, data, idle)
	if err == nil {
		return n, nil
	}
	c.mu.Lock()
	exited, stdin := c.exited, c.stdin
	c.mu.Unlock()
	switch {
	case errors.Is(err, vocab.ErrNotReading):
		return n, fmt.Errorf("took %d of %d bytes, then none for %s: %w", n, len(data), idle, vocab.ErrNotReading)
	case ctx.Err() != nil:
		return n, ctx.Err()
	case exited:
		return n, vocab.ErrNotRunning
	case errors.Is(err, os.ErrClosed) && stdin != f:
		// Closed under us: an eof or the job's end.
		return n, fmt.Errorf("closed while writing: %w", vocab.ErrStdinClosed)
	case errors.Is(err, os.ErrClosed):
		return n, vocab.ErrNotRunning
	case errors.Is(err, syscall.EPIPE):
		// Nobody holds the read end any more: the job closed its
		// stdin (or is exiting).
		return n, fmt.Errorf("the job closed it: %w", vocab.ErrStdinClosed)
	}
	return n, err
}

// takeStdinTurn waits for the writers before it to finish, for at most
// idle (0: no bound) or until ctx ends. Waiting out idle behind another
// write means the job is not reading that one either.
func (c *child) takeStdinTurn(ctx context.Context, idle time.Duration) error {
	select {
	case c.stdinTurn <- struct{}{}:
		return nil
	default:
	}
	var expired <-chan time.Time
	if idle > 0 {
		t := time.NewTimer(idle)
		defer t.Stop()
		expired = t.C
	}
	select {
	case c.stdinTurn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return fmt.Errorf("another write has been blocked for %s: %w", idle, vocab.ErrNotReading)
	}
}

// stdinState says why c's stdin cannot be written, or nil when it can.
func (c *child) stdinState() error {
	_, err := c.stdinFile()
	return err
}

// stdinFile returns the write end of c's stdin pipe.
func (c *child) stdinFile() (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cmd == nil || c.exited:
		return nil, vocab.ErrNotRunning
	case c.stdin == nil:
		return nil, vocab.ErrStdinClosed
	}
	return c.stdin, nil
}

// closeChildStdin closes c's stdin without waiting for a writer: closing
// the file interrupts a write blocked on the full pipe. A pty job's input
// is its terminal, which stays open: it gets what a terminal sends for end
// of file, ^D (at the start of a line: the reader's read returns 0).
func (r *runners) closeChildStdin(ctx context.Context, c *child) error {
	if c.pty {
		_, err := r.writeChild(ctx, c, []byte{4}, db.FinalWriteTimeout)
		return err
	}
	c.mu.Lock()
	f, started, exited := c.stdin, c.cmd != nil, c.exited
	c.stdin = nil
	c.mu.Unlock()
	switch {
	case !started || exited:
		return vocab.ErrNotRunning
	case f == nil:
		return vocab.ErrStdinClosed
	}
	f.Close()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), db.FinalWriteTimeout)
	defer cancel()
	return r.s.db.SetStdin(wctx, c.id, vocab.StdinClosed)
}

// writeIdle writes all of data to the pipe f and returns how much it
// wrote. It gives up with vocab.ErrNotReading when the reader takes nothing for
// idle (0: no bound), and when ctx ends. The pipe is non-blocking under
// Go's poller, so a write deadline interrupts a write stuck on a full
// pipe and reports what went in before it.
func writeIdle(ctx context.Context, f *os.File, data []byte, idle time.Duration) (int, error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.SetWriteDeadline(time.Now())
		close(fired)
	})
	defer func() {
		if !stop() {
			<-fired
		}
		f.SetWriteDeadline(time.Time{})
	}()
	total := 0
	for {
		if idle > 0 {
			f.SetWriteDeadline(time.Now().Add(idle))
		}
		// After setting the deadline, so that a cancellation that came
		// just before is not overwritten and lost.
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := f.Write(data[total:])
		total += n
		switch {
		case err == nil:
			return total, nil
		case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil:
			if n == 0 {
				return total, vocab.ErrNotReading
			}
			// It took some within the bound: it reads, slowly.
			continue
		}
		return total, err
	}
}

// SendKeys sends tmux key names (or, with literal, text as typed) to a tmux
// job. tmux delivers them, so any supervisor serves any tmux job (tmux.go).
// Errors: vocab.ErrNotFound, vocab.ErrNotTmux for a pipe job, vocab.ErrNotRunning,
// vocab.ErrNoTmux, vocab.ErrInvalid for an unknown key name.
func (s *Supervisor) SendKeys(ctx context.Context, jobID string, keys []string, literal bool) error {
	job, err := s.db.FindJobByID(ctx, jobID)
	if err != nil {
		return fmt.Errorf("send keys to job %s: %w", jobID, err)
	}
	if job.Mode == vocab.ModePTY {
		if len(keys) == 0 {
			return fmt.Errorf("send keys to job %s: %w", jobID, invalid(errors.New("no keys given")))
		}
		b, err := parse.KeysBytes(keys, literal)
		if err != nil {
			return fmt.Errorf("send keys to job %s: %w", jobID, invalid(err))
		}
		_, err = s.Write(ctx, jobID, b, false, 0)
		return err
	}
	if job.Mode != vocab.ModeTmux {
		return fmt.Errorf("send keys to job %s: %w", jobID, vocab.ErrNotTmux)
	}
	return tmuxjob.SendKeys(job, keys, literal)
}
