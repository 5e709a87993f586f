package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/tmux"
)

// tmuxServer is the tmux server that runs tmux jobs: the user's default
// one, so a plain `tmux attach` finds the sessions, unless
// JOBS_TMUX_SOCKET names a private one.
func tmuxServer() tmux.Server {
	return tmux.Server{Socket: os.Getenv("JOBS_TMUX_SOCKET")}
}

// tmuxJob finds a running tmux job or says why the verb cannot act on it.
func (c *Client) tmuxJob(ctx context.Context, ref string) (db.Job, error) {
	if err := c.check(ctx); err != nil {
		return db.Job{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return db.Job{}, err
	}
	if j.Mode != "tmux" {
		return j, fmt.Errorf("job %s is %w (start it with --tmux)", ref, ErrNotTmux)
	}
	if j.Status.Terminal() {
		return j, fmt.Errorf("job %s is %w (%s)", ref, ErrNotRunning, j.Status)
	}
	return j, nil
}

// tmuxErr names the job when its session has gone.
func tmuxErr(ref string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tmux.ErrNoSession):
		return fmt.Errorf("job %s is %w: its tmux session is gone", ref, ErrNotRunning)
	case errors.Is(err, tmux.ErrNotInstalled):
		return fmt.Errorf("%w: %v", ErrNoTmux, err)
	}
	return err
}

// SendKeys sends tmux key names (Enter, C-c, Up …) to a tmux job, or the
// text as typed when literal is set. tmux itself delivers them, so this
// works whether or not the job's supervisor is alive.
func (c *Client) SendKeys(ctx context.Context, ref string, keys []string, literal bool) error {
	j, err := c.tmuxJob(ctx, ref)
	if err != nil {
		return err
	}
	s := tmuxServer()
	if literal {
		for _, k := range keys {
			if err := s.SendLiteral(j.TmuxSession, k); err != nil {
				return tmuxErr(ref, err)
			}
		}
		return nil
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys to send", ErrInvalid)
	}
	return tmuxErr(ref, s.SendKeys(j.TmuxSession, keys...))
}

// Capture returns a tmux job's screen as clean text, with up to scrollback
// lines of history above it.
func (c *Client) Capture(ctx context.Context, ref string, scrollback int) (string, error) {
	j, err := c.tmuxJob(ctx, ref)
	if err != nil {
		return "", err
	}
	out, err := tmuxServer().Capture(j.TmuxSession, scrollback)
	return out, tmuxErr(ref, err)
}

// AttachCommand returns the argv that attaches a terminal to a tmux job's
// session.
func (c *Client) AttachCommand(ctx context.Context, ref string) ([]string, error) {
	j, err := c.tmuxJob(ctx, ref)
	if err != nil {
		return nil, err
	}
	return tmuxServer().AttachArgv(j.TmuxSession), nil
}
