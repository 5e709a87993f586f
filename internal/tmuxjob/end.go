package tmuxjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/hook"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/vocab"
)

// The end of a tmux job is recorded by its tmux-pipe helper (package
// tmuxpipe) or, when the helper is gone, by a kill (recordEndHere):
// both read it from tmux and store it with the functions below.

// statusWait bounds the wait for the exit status of a dead pane
// (see ReadEnd). A process that closed its terminal and went on
// running never gives one.
const statusWait = 2 * time.Second

// End is what tmux says about the end of a job's pane.
type End struct {
	Dead bool // the command has exited
	Code int  // its exit status (128+n for signal n); -1 unknown
	Gone bool // the session no longer exists: nothing more to learn
}

// ReadEnd asks tmux whether the pane of job j has ended, and how.
func ReadEnd(srv tmux.Server, j db.Job) (End, error) {
	dead, code, err := srv.PaneStatus(j.TmuxSession)
	// tmux marks the pane dead when its terminal closes, which can come a
	// moment before it has reaped the process and knows the status.
	for deadline := time.Now().Add(statusWait); err == nil && dead && code < 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		Nudge(j)
		dead, code, err = srv.PaneStatus(j.TmuxSession)
	}
	if errors.Is(err, tmux.ErrNoSession) || errors.Is(err, tmux.ErrNotInstalled) {
		return End{Gone: true, Code: -1}, nil
	}
	if err != nil {
		return End{}, fmt.Errorf("read end of job: %w", err)
	}
	if !dead {
		code = -1
	}
	return End{Dead: dead, Code: code}, nil
}

// Nudge makes the tmux server reap the job's pane process if it is a
// zombie. tmux 3.3 now and then misses the SIGCHLD of a pane (seen on a
// server that has just started; it reaps only when some other child of
// it exits): the pane then never reports its exit status, and, while
// another process holds its terminal, never even dies. A SIGCHLD sent to
// the server — the zombie's parent, checked to be tmux — makes it reap.
func Nudge(j db.Job) {
	if j.PID <= 1 || j.PIDStart == 0 {
		return
	}
	info, err := proc.Inspect(j.PID)
	if err != nil || !info.Dead() || info.StartTime != j.PIDStart || info.PPID <= 1 {
		return
	}
	if parent, err := proc.Inspect(info.PPID); err == nil && strings.HasPrefix(parent.Comm, "tmux") {
		_ = syscall.Kill(info.PPID, syscall.SIGCHLD)
	}
}

// Finish stores the final status of tmux job j from its end and its
// stop request, and runs its on-exit command. A job someone else finished
// first is returned as stored (and no hook runs).
func Finish(ctx context.Context, d *db.DB, j db.Job, end End, logf func(string, ...any)) (db.Job, error) {
	stop, err := d.StopRequested(ctx, j.ID)
	if err != nil {
		return j, fmt.Errorf("record end: %w", err)
	}
	var t db.Transition
	if end.Dead && end.Code >= 0 {
		code := end.Code
		t.ExitCode = &code
		if stop != "" && code > 128 && code <= 128+64 {
			// The pane's shell reports the signal that ended the job as
			// 128+n; a stop we sent is that signal, and a pipe job killed
			// alike records it: the same kill reads the same way.
			t.Signal = vocab.SignalName(syscall.Signal(code - 128))
		}
	}
	switch {
	case stop == vocab.StatusTimedOut:
		t.To, t.Reason = stop, fmt.Sprintf("timed out after %s", j.Timeout)
	case stop != "":
		t.To, t.Reason = stop, "killed"
	case !end.Dead:
		t.To, t.Reason = vocab.StatusLost, fmt.Sprintf("tmux session %s ended before the job's exit status was read", j.TmuxSession)
	case end.Code == 0:
		t.To = vocab.StatusDone
	case end.Code < 0:
		t.To, t.Reason = vocab.StatusFailed, "tmux did not report an exit status"
	default:
		t.To = vocab.StatusFailed
	}
	cur, err := d.FindJobByID(ctx, j.ID)
	if err != nil {
		return j, fmt.Errorf("record end: %w", err)
	}
	if cur.Status == vocab.StatusStarting && t.To != vocab.StatusFailed && t.To != vocab.StatusKilled && t.To != vocab.StatusLost {
		t.To = vocab.StatusFailed // only these moves are allowed from starting
	}
	final, err := d.Transition(ctx, j.ID, t)
	if errors.Is(err, vocab.ErrInvalidTransition) {
		return d.FindJobByID(ctx, j.ID)
	}
	if err != nil {
		return j, fmt.Errorf("record end: %w", err)
	}
	// Not a supervisor: its Reaper is never started, it only keeps the
	// hook's pid owned while the hook is waited for.
	(&hook.Runner{DB: d, Logf: logf, Reaper: proc.NewReaper()}).Run(ctx, final, nil)
	return final, nil
}

// CloseSession ends the job's session, which also ends whatever still
// runs in it (SIGHUP) and closes the tmux-pipe helper's pipe.
func CloseSession(srv tmux.Server, j db.Job, logf func(string, ...any)) {
	if err := srv.KillSession(j.TmuxSession); err != nil && !errors.Is(err, tmux.ErrNoSession) {
		logf("job %s: %v", j.ID, err)
	}
}
