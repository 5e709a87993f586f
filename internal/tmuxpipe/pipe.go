package tmuxpipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Timings of the tmux-pipe helper.
const (
	// tmuxPollInterval is how often the helper looks whether the pane's
	// command still runs. Looking is a /proc read; tmux is asked only once
	// the process is gone (and every tmuxCheckInterval in case the pid
	// cannot be watched), so a quiet job costs next to nothing.
	tmuxPollInterval  = 50 * time.Millisecond
	tmuxCheckInterval = 2 * time.Second
	// tmuxStartWait bounds how long the helper waits for the supervisor
	// to record the job running before it adopts the job itself (the
	// supervisor died between creating the session and recording it).
	tmuxStartWait = 15 * time.Second
	// tmuxDrainWait bounds the wait for the rest of the output once the
	// pipe is closed; tmux has written everything before it reports the
	// pane dead, so this only guards against a wedged server.
	tmuxDrainWait = 2 * time.Second
	// tmuxQuiet is how long the pipe of a dead pane whose session is kept
	// must stay silent before its output counts as complete.
	tmuxQuiet = 100 * time.Millisecond
)

// Run is the tmux-pipe helper, the hidden `jobs tmux-pipe --db PATH
// --job ID` that tmux starts with pipe-pane when it creates a tmux job's
// session. It reads the pane's output from in and appends it to the job as
// stream pty through its own appender, so capture needs no supervisor. It
// enforces the job's timeout. Once the pane's command has exited (or the
// session is gone) it stores the rest of the output, then the final status:
// done or failed by the exit status tmux reports (128+n for signal n),
// killed or timed_out when a stop was requested, lost when the session
// vanished before the status could be read. It then closes the session
// (unless the job keeps it) and runs the job's on-exit command. Resource
// usage is not known for tmux jobs: tmux, not us, waits for the process.
//
// The tmux server to talk to is the one recorded with the job ($JOBS_TMUX_SOCKET,
// which the pipe command sets, for a job recorded before it was kept).
// grace is the time between SIGTERM and SIGKILL when the timeout ends the
// job (0 means control.DefaultGrace).
func Run(ctx context.Context, dbPath, jobID string, grace time.Duration, in io.Reader) error {
	d, err := db.Open(ctx, dbPath)
	if err != nil {
		return fmt.Errorf("tmux pipe: %w", err)
	}
	defer d.Close()
	if grace <= 0 {
		grace = control.DefaultGrace
	}
	p := &tmuxPipe{d: d, id: jobID, grace: grace, logf: func(string, ...any) {}}
	if err := p.run(ctx, in); err != nil {
		return fmt.Errorf("tmux pipe of job %s: %w", jobID, err)
	}
	return nil
}

// tmuxPipe is one running helper.
type tmuxPipe struct {
	d     *db.DB
	id    string
	grace time.Duration // SIGTERM to SIGKILL on timeout
	srv   tmux.Server
	logf  func(string, ...any)

	mu      sync.Mutex
	dropped int64
	dropErr string
}

func (p *tmuxPipe) run(ctx context.Context, in io.Reader) error {
	job, err := p.d.FindJobByID(ctx, p.id)
	if err != nil {
		return err
	}
	p.srv = tmuxjob.ServerOf(job)
	app := logs.NewAppender(p.d, logs.ProcessOptions(p.noteDropped))
	app.Open()
	defer app.Close()
	if err := app.Track(p.id, job.MaxOutput); err != nil {
		return err
	}

	// The reader owns in. It stops at end of file: the session was
	// destroyed (by us once the job ended, or by someone else).
	eof := make(chan struct{})
	r := &pipeReader{}
	go func() {
		defer close(eof)
		r.copy(in, func(b []byte) {
			// Write blocks while the database lags, which slows
			// tmux's writes to us and so the pane: nothing is lost.
			if err := app.Write(p.id, logs.PTY, b); err != nil {
				p.noteDropped(p.id, int64(len(b)), err)
			}
		})
	}()

	if job, err = p.waitRunning(ctx, job, eof); err != nil {
		return err
	}
	p.watch(ctx, job, eof)
	end, err := tmuxjob.ReadEnd(p.srv, job)
	if err != nil {
		return err
	}
	if !end.Dead && !end.Gone {
		return fmt.Errorf("stopped with the command still running: %w", context.Cause(ctx))
	}

	// The rest of the output. tmux reports a pane dead only once it has
	// written all of the pane's output into our pipe
	// (window_pane_destroy_ready), so it is in the socket buffer. tmux
	// refuses to close the pipe of a dead pane, but closing the session
	// closes it: then end of file comes right after the last byte. A
	// kept session stays, and the pipe is drained until it is quiet.
	keep := false
	if !end.Gone {
		if keep, err = p.d.KeepTmux(ctx, p.id); err != nil {
			p.logf("job %s: %v", p.id, err)
		}
		if !keep {
			tmuxjob.CloseSession(p.srv, job, p.logf)
		}
	}
	if keep {
		r.waitQuiet(eof, tmuxQuiet, tmuxDrainWait)
	} else {
		select {
		case <-eof:
		case <-time.After(tmuxDrainWait):
			p.logf("job %s: the pipe did not close after %s", p.id, tmuxDrainWait)
		}
	}
	// Everything read is stored before the status says the job ended:
	// whoever sees it finished can read all of its output.
	if err := app.Untrack(p.id); err != nil {
		p.logf("flush output of job %s: %v", p.id, err)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), db.FinalWriteTimeout)
	defer cancel()
	p.recordDropped(wctx, job)
	_, err = tmuxjob.Finish(wctx, p.d, job, end, p.logf)
	return err
}

// pipeReader copies the pipe and tells when it has been quiet.
type pipeReader struct {
	mu   sync.Mutex
	busy bool      // a read returned data not yet handed on
	last time.Time // when the last data was handed on
}

func (r *pipeReader) copy(in io.Reader, write func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			r.mu.Lock()
			r.busy = true
			r.mu.Unlock()
			write(buf[:n])
			r.mu.Lock()
			r.busy, r.last = false, time.Now()
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// waitQuiet returns once nothing has come from the pipe for quiet, the
// pipe has ended, or limit has passed.
func (r *pipeReader) waitQuiet(eof <-chan struct{}, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	since := time.Now()
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		r.mu.Lock()
		last := r.last
		if r.busy || last.After(since) {
			since = time.Now()
		}
		r.mu.Unlock()
		if time.Since(since) >= quiet {
			return
		}
		select {
		case <-eof:
			return
		case <-tick.C:
		}
	}
}

// waitRunning returns the job once its supervisor has recorded it running
// (or ended). The pane may exit before that, and the end can only be
// recorded after the start. A supervisor that died in between leaves the
// job starting: the helper then records the start itself and carries on —
// the job is adopted.
func (p *tmuxPipe) waitRunning(ctx context.Context, job db.Job, eof <-chan struct{}) (db.Job, error) {
	deadline := time.Now().Add(tmuxStartWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for job.Status == vocab.StatusStarting {
		if time.Now().After(deadline) {
			t := db.Transition{To: vocab.StatusRunning, Detail: map[string]any{"tmux_session": job.TmuxSession, "adopted": true}}
			if pid, err := p.srv.PanePID(job.TmuxSession); err == nil {
				start, _ := proc.StartTime(pid)
				t.PID, t.PGID, t.PIDStart = pid, pid, start
			}
			j, err := p.d.Transition(ctx, p.id, t)
			if err == nil {
				return j, nil
			}
			if !errors.Is(err, vocab.ErrInvalidTransition) {
				return job, err
			}
		} else {
			select {
			case <-ctx.Done():
				return job, ctx.Err()
			case <-tick.C:
			}
		}
		var err error
		if job, err = p.d.FindJobByID(ctx, p.id); err != nil {
			return job, err
		}
	}
	return job, nil
}

// watch waits until the pane's command has exited, the session is gone or
// ctx ends, and enforces the job's timeout meanwhile.
func (p *tmuxPipe) watch(ctx context.Context, job db.Job, eof <-chan struct{}) {
	var expired <-chan time.Time
	if job.Timeout > 0 && !job.Status.Terminal() {
		started := time.Now()
		if job.StartedAt != nil {
			started = *job.StartedAt
		}
		t := time.NewTimer(time.Until(started.Add(job.Timeout)))
		defer t.Stop()
		expired = t.C
	}
	tick := time.NewTicker(tmuxPollInterval)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-eof:
			// The session was destroyed, or someone closed our pipe
			// with the pane alive: then capture has stopped, but the
			// exit status is still worth waiting for.
			dead, _, err := p.srv.PaneStatus(job.TmuxSession)
			if err != nil || dead {
				return
			}
			eof = nil
			p.note(ctx, job, "output capture stopped: the tmux pipe was closed")
		case <-expired:
			expired = nil
			if _, err := killTmuxFromHelper(ctx, p.d, job, p.grace); err != nil {
				p.logf("time out job %s: %v", p.id, err)
			}
		case <-tick.C:
			if proc.Alive(job.PID, job.PIDStart) && time.Since(lastCheck) < tmuxCheckInterval {
				continue
			}
			lastCheck = time.Now()
			dead, _, err := p.srv.PaneStatus(job.TmuxSession)
			if dead || errors.Is(err, tmux.ErrNoSession) {
				return
			}
			tmuxjob.Nudge(job)
		case <-ctx.Done():
			return
		}
	}
}

// killTmuxFromHelper ends a job whose timeout passed: the stop intent
// first, then the processes. The helper's own watch loop records the end.
func killTmuxFromHelper(ctx context.Context, d *db.DB, job db.Job, grace time.Duration) (vocab.KillResult, error) {
	if err := d.RequestStop(ctx, job.ID, vocab.StatusTimedOut); err != nil {
		return vocab.KillResult{}, err
	}
	return control.End(ctx, control.Target(ctx, d, job), control.DefaultGrace)
}

// noteDropped is the appender's OnDropped: output the database could not
// take, recorded as an event at the end.
func (p *tmuxPipe) noteDropped(_ string, n int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropped += n
	if err != nil {
		p.dropErr = err.Error()
	}
}

func (p *tmuxPipe) recordDropped(ctx context.Context, job db.Job) {
	p.mu.Lock()
	n, msg := p.dropped, p.dropErr
	p.mu.Unlock()
	if n == 0 {
		return
	}
	detail, _ := json.Marshal(map[string]any{"bytes": n, "error": msg})
	if _, err := p.d.AddEvent(ctx, db.Event{JobID: job.ID, Scope: job.Scope, Kind: "output_dropped", Detail: detail}); err != nil {
		p.logf("record dropped output of job %s: %v", job.ID, err)
	}
}

// note records something worth knowing about the job in its history.
func (p *tmuxPipe) note(ctx context.Context, job db.Job, msg string) {
	detail, _ := json.Marshal(map[string]any{"message": msg})
	if _, err := p.d.AddEvent(ctx, db.Event{JobID: job.ID, Scope: job.Scope, Kind: "note", Detail: detail}); err != nil {
		p.logf("note on job %s: %v", job.ID, err)
	}
}
