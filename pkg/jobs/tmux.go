package jobs

import (
	"context"
	"fmt"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// tmuxJob finds a tmux job or says why the verb cannot act on it. live
// requires the job to be running; capture and attach also work on a
// finished job whose session was kept.
func (c *Client) tmuxJob(ctx context.Context, ref string, live bool) (db.Job, error) {
	if err := c.check(ctx); err != nil {
		return db.Job{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return db.Job{}, err
	}
	if j.Mode != vocab.ModeTmux {
		return j, fmt.Errorf("job %s is %w (start it with --tmux)", echo(ref), ErrNotTmux)
	}
	if live && j.Status.Terminal() {
		return j, fmt.Errorf("job %s is %w (%s)", echo(ref), ErrNotRunning, j.Status)
	}
	return j, nil
}

// SendKeys sends tmux key names (Enter, C-c, Up …) to a tmux or pty job,
// or the text as typed when literal is set. tmux itself delivers them to a
// tmux job, so this works whether or not its supervisor is alive; a pty
// job's supervisor writes to its terminal the bytes a terminal sends for
// them (parse.KeyBytes).
func (c *Client) SendKeys(ctx context.Context, ref string, keys []string, literal bool) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if c.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, c.path)
	}
	if j, err := c.find(ctx, ref); err == nil && j.Mode == vocab.ModePTY {
		if len(keys) == 0 {
			return fmt.Errorf("%w: no keys to send", ErrInvalid)
		}
		b, err := parse.KeysBytes(keys, literal)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		_, err = c.write(ctx, ref, b, false)
		return err
	}
	j, err := c.tmuxJob(ctx, ref, true)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys to send", ErrInvalid)
	}
	return publicErr(ref, tmuxjob.SendKeys(j, keys, literal))
}

// Capture returns a tmux job's screen as clean text, with up to scrollback
// lines of history above it. A finished job whose session was kept
// (Spec.KeepTmux) can still be read.
func (c *Client) Capture(ctx context.Context, ref string, scrollback int) (string, error) {
	j, err := c.tmuxJob(ctx, ref, false)
	if err != nil {
		return "", err
	}
	out, err := tmuxjob.Capture(j, scrollback)
	return out, publicErr(ref, err)
}

// AttachCommand returns the argv that attaches a terminal to a tmux job's
// session.
func (c *Client) AttachCommand(ctx context.Context, ref string) ([]string, error) {
	j, err := c.tmuxJob(ctx, ref, false)
	if err != nil {
		return nil, err
	}
	return tmuxjob.AttachArgv(j), nil
}
