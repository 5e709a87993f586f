package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Write writes data to the job's stdin and, with eof, closes it (the job
// reads end of file). It blocks while the job does not read and its pipe is
// full, until ctx ends. A job of another live supervisor is written through
// that supervisor. Errors: db.ErrNotFound, ErrNotRunning (finished),
// ErrStdinClosed (closed before, never a pipe, or closed by the job).
func (s *Supervisor) Write(ctx context.Context, jobID string, data []byte, eof bool) error {
	c := s.child(jobID)
	if c == nil {
		job, err := s.db.FindJobByID(ctx, jobID)
		if err != nil {
			return fmt.Errorf("write job %s: %w", jobID, err)
		}
		if job.Status.Terminal() {
			return fmt.Errorf("write job %s: %w", jobID, ErrNotRunning)
		}
		if job.Mode == "tmux" {
			return writeTmux(job, data, eof) // types into the pane: tmux.go
		}
		if job.Stdin != "pipe" {
			return fmt.Errorf("write job %s: %w", jobID, ErrStdinClosed)
		}
		conn, err := s.owner(ctx, job)
		if err != nil {
			return fmt.Errorf("write job %s: %w", jobID, err)
		}
		if conn == nil {
			return fmt.Errorf("write job %s: %w", jobID, ErrNotRunning)
		}
		defer conn.Close()
		return conn.Write(ctx, jobID, data, eof)
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.writeChild(ctx, c, data, eof); err != nil {
		return fmt.Errorf("write job %s: %w", jobID, err)
	}
	return nil
}

func (s *Supervisor) writeChild(ctx context.Context, c *child, data []byte, eof bool) error {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.mu.Lock()
	f, started, exited := c.stdin, c.cmd != nil, c.exited
	c.mu.Unlock()
	switch {
	case !started || exited:
		return ErrNotRunning
	case f == nil:
		return ErrStdinClosed
	}
	if len(data) > 0 {
		if err := writeCtx(ctx, f, data); err != nil {
			c.mu.Lock()
			exited = c.exited
			c.mu.Unlock()
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case exited || errors.Is(err, os.ErrClosed):
				return ErrNotRunning
			case errors.Is(err, syscall.EPIPE):
				// Nobody holds the read end any more: the job closed
				// its stdin (or is exiting).
				return fmt.Errorf("the job closed it: %w", ErrStdinClosed)
			}
			return err
		}
	}
	if eof {
		c.mu.Lock()
		if c.stdin == f {
			c.stdin = nil
		}
		c.mu.Unlock()
		f.Close()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
		defer cancel()
		if err := s.db.SetStdin(wctx, c.id, "closed"); err != nil {
			return err
		}
	}
	return nil
}

// writeCtx writes all of data to the pipe f, giving up when ctx ends. The
// pipe is non-blocking under Go's poller, so a write deadline interrupts a
// write stuck on a full pipe.
func writeCtx(ctx context.Context, f *os.File, data []byte) error {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.SetWriteDeadline(time.Now())
		close(fired)
	})
	_, err := f.Write(data)
	if !stop() {
		<-fired
		f.SetWriteDeadline(time.Time{})
	}
	return err
}

// SendKeys sends tmux key names (or, with literal, text as typed) to a tmux
// job. tmux delivers them, so any supervisor serves any tmux job (tmux.go).
// Errors: db.ErrNotFound, ErrNotTmux for a pipe job, ErrNotRunning,
// ErrNoTmux, ErrInvalid for an unknown key name.
func (s *Supervisor) SendKeys(ctx context.Context, jobID string, keys []string, literal bool) error {
	job, err := s.db.FindJobByID(ctx, jobID)
	if err != nil {
		return fmt.Errorf("send keys to job %s: %w", jobID, err)
	}
	if job.Mode != "tmux" {
		return fmt.Errorf("send keys to job %s: %w", jobID, ErrNotTmux)
	}
	return SendKeysDirect(job, keys, literal)
}
