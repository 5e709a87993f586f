package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// agentEnv keeps tools from colouring, paging or drawing for a terminal
// nobody watches; StartRequest.Job.Color skips it.
var agentEnv = []string{"NO_COLOR=1", "TERM=dumb", "PAGER=cat", "GIT_PAGER=cat"}

// ptyEnv is set for pty jobs: a terminal type that programs know, and no
// pager.
var ptyEnv = []string{"TERM=xterm-256color", "PAGER=cat", "GIT_PAGER=cat"}

// pipeEnv is set for jobs whose output goes to a pipe, unless the caller's
// environment or the job's sets it otherwise.
var pipeEnv = []string{"PYTHONUNBUFFERED=1"}

// shell runs one-string commands.
const shell = "/bin/sh"

// Start creates the job and starts its process. It returns the job once the
// process runs (status running), or, when it could not be started (missing
// cwd, command not found), the job in status failed with the reason, and a
// nil error: the job exists and its history says what happened. Errors are
// for requests that create no job: vocab.ErrInvalid, vocab.ErrNameTaken, vocab.ErrLimit,
// vocab.ErrSupervisorClosed, vocab.ErrNoTmux, or a database failure.
func (s *Supervisor) Start(ctx context.Context, req protocol.StartRequest) (db.Job, error) {
	// A stat(2) before each start: a job created in a database file that
	// is no longer at its path would vanish from every listing.
	if err := s.checkFile(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	// Planted beside the database since the supervisor opened it, the
	// status mark is refused before a job exists (a few syscalls).
	if err := s.db.CheckStatusMark(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	nj, argv, env, err := s.prepare(req)
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	if nj.Mode == vocab.ModeTmux {
		// A tmux job starts at once or not at all: its start is the
		// tmux helper's, which a queue cannot hold back (yet).
		if queued(nj) {
			return db.Job{}, fmt.Errorf("start job: %w", invalid(errors.New("a tmux job cannot wait in a queue or for other jobs")))
		}
		nj.QueueOnLimit = false
		return s.tmux.start(ctx, req, nj, argv, env) // tmux.go
	}
	if req.Replace && nj.Name != "" {
		if err := s.replace(ctx, nj.Scope, nj.Name); err != nil {
			return db.Job{}, fmt.Errorf("start job: replace %q: %w", nj.Name, err)
		}
	}
	if queued(nj) {
		return s.queue.startQueued(ctx, req, nj) // queue.go
	}
	base := req.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	c, err := s.runners.register(nj.ID, base)
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	c.timeoutGrace = cmp.Or(req.TimeoutGrace, s.cfg.Grace) // before run reads it
	plain := nj
	plain.QueueOnLimit = false // its request is kept only by startQueued
	job, err := s.db.CreateJob(ctx, plain, s.limitsFor(req))
	if err != nil {
		s.runners.drop(c, db.Job{})
		var lim *vocab.LimitError
		if nj.QueueOnLimit && errors.As(err, &lim) && lim.Label == "" {
			// The scope's (or the total) cap: wait for room.
			return s.queue.startQueued(ctx, req, nj)
		}
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	c.mu.Lock()
	c.job = job
	c.mu.Unlock()
	// The job exists now: whatever happens to the caller, it must end up
	// running or failed, never stuck in starting.
	return s.runners.spawn(context.WithoutCancel(ctx), c, req, argv, env)
}

// prepare validates req and works out what to store and what to execute.
func (s *Supervisor) prepare(req protocol.StartRequest) (nj db.NewJob, argv, env []string, err error) {
	nj = req.Job
	if nj.ID == "" {
		nj.ID = db.NewID()
	}
	if nj.Scope == "" {
		nj.Scope = vocab.DefaultScope
	}
	if nj.Mode == "" {
		nj.Mode = vocab.ModePipe
	}
	if nj.Stdin == "" {
		nj.Stdin = vocab.StdinPipe
	}
	nj.SupervisorID = s.id
	switch {
	case nj.Timeout < 0:
		return nj, nil, nil, invalid(errors.New("negative timeout"))
	case nj.TTL < 0:
		return nj, nil, nil, invalid(errors.New("negative ttl"))
	case nj.MaxOutput < 0:
		return nj, nil, nil, invalid(errors.New("negative output cap"))
	case req.TimeoutGrace < 0:
		return nj, nil, nil, invalid(errors.New("negative timeout grace"))
	case nj.Mode != vocab.ModePipe && nj.Mode != vocab.ModeTmux && nj.Mode != vocab.ModePTY:
		return nj, nil, nil, invalid(fmt.Errorf("unknown mode %q: pipe, tmux or pty", nj.Mode))
	case nj.Mode == vocab.ModePTY && nj.Stdin != vocab.StdinPipe:
		return nj, nil, nil, invalid(errors.New("a pty job's stdin is its terminal: it cannot be /dev/null"))
	case req.Merge && nj.Mode != vocab.ModePipe:
		return nj, nil, nil, invalid(errors.New("merge is for pipe jobs: a terminal has one stream already"))
	case req.Cols < 0 || req.Rows < 0 || req.Cols > 0xffff || req.Rows > 0xffff:
		return nj, nil, nil, invalid(errors.New("window size out of range"))
	case strings.Trim(req.TmuxPrefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" || len(req.TmuxPrefix) > 32:
		return nj, nil, nil, invalid(errors.New("a tmux session prefix has at most 32 letters, digits, '-' or '_'"))
	}
	switch {
	case len(nj.Argv) > 0:
		if nj.Argv[0] == "" {
			return nj, nil, nil, invalid(errors.New("empty command"))
		}
		argv = nj.Argv
		if nj.Command == "" {
			nj.Command = textclean.ShellJoin(argv)
		}
	case strings.TrimSpace(nj.Command) != "":
		argv = []string{shell, "-c", nj.Command}
		nj.Argv = argv
	default:
		return nj, nil, nil, invalid(errors.New("empty command"))
	}
	if nj.Cwd == "" {
		if nj.Cwd, err = os.Getwd(); err != nil {
			return nj, nil, nil, fmt.Errorf("working directory: %w", err)
		}
	} else if nj.Cwd, err = filepath.Abs(nj.Cwd); err != nil {
		return nj, nil, nil, fmt.Errorf("working directory: %w", err)
	}
	var names []string
	for _, e := range req.Env {
		k, _, err := parse.EnvAssign(e) // the rule pkg/jobs applied
		if err != nil {
			return nj, nil, nil, invalid(err)
		}
		names = appendUnique(names, k)
	}
	if nj.EnvNames == nil {
		nj.EnvNames = names
	}
	base := req.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	env = nil
	if nj.Mode == vocab.ModePipe {
		// Python block-buffers into a pipe: a dev server's "Serving on
		// :8000" would wait for kilobytes more. First, so that the
		// caller's own value wins.
		env = append(env, pipeEnv...)
	}
	env = append(env, base...)
	switch {
	case nj.Mode == vocab.ModePTY:
		// A terminal: programs colour and draw as on one, and the
		// output is cleaned for agents when read. A pager would wait
		// for keys nobody presses.
		env = append(env, ptyEnv...)
	case !nj.Color && nj.Mode != vocab.ModeTmux:
		env = append(env, agentEnv...)
	}
	env = append(env, req.Env...)
	env = append(env, protocol.EnvJobID+"="+nj.ID, protocol.EnvScope+"="+nj.Scope)
	return nj, argv, parse.DedupEnv(env), nil
}

// replace ends the active jobs of scope named name, wherever they run.
func (s *Supervisor) replace(ctx context.Context, scope, name string) error {
	jobs, err := s.db.FindJobs(ctx, db.Filter{
		Scope: scope, Name: name, Statuses: []vocab.Status{vocab.StatusQueued, vocab.StatusStarting, vocab.StatusRunning},
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := s.Kill(ctx, j.ID, 0); err != nil && !errors.Is(err, vocab.ErrNotFound) {
			return err
		}
	}
	return nil
}

// spawn starts the process of the created job c.
func (r *runners) spawn(ctx context.Context, c *child, req protocol.StartRequest, argv, env []string) (db.Job, error) {
	job := c.job
	if reason := checkCwd(job.Cwd); reason != "" {
		return r.failStart(ctx, c, reason)
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := proc.LookPath(path, parse.EnvValue(env, "PATH"), job.Cwd)
		if err != nil {
			return r.failStart(ctx, c, err.Error())
		}
		path = p
	}
	if err := r.app.Track(c.id, job.MaxOutput); err != nil {
		return r.failStart(ctx, c, "capture output: "+err.Error())
	}

	cio, err := openChildIO(job, req)
	if err != nil {
		r.app.Untrack(c.id)
		return r.failStart(ctx, c, err.Error())
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Env:         env,
		Dir:         job.Cwd,
		Stdin:       cio.childIn,
		Stdout:      cio.childOut,
		Stderr:      cio.childErr,
		SysProcAttr: cio.attr(),
	}
	// Its own cgroup, where the system offers one: what it forks stays
	// there whatever it does to its group or environment, so a kill finds
	// it (setsid env -i …).
	cg := r.jobCgroup(c.id)
	if cg != nil {
		intoCgroup(cmd.SysProcAttr, cg)
	}
	path0, args0, env0 := cmd.Path, cmd.Args, cmd.Env // before the shim takes them
	err = r.startChild(cmd)
	if err != nil && cg != nil {
		// The cgroup may be what refused (a controller's limit, a
		// hierarchy that takes no processes there): try once without
		// it. Only when that succeeds was it the cgroup, and later
		// starts go without one; a command that cannot start fails the
		// same way twice.
		cg.Close()
		_ = proc.RemoveCgroup(cg.Path)
		cg = nil
		retry := &exec.Cmd{Path: path0, Args: args0, Env: env0, Dir: cmd.Dir, Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr,
			SysProcAttr: cio.attr()}
		if rerr := r.startChild(retry); rerr == nil {
			r.noCgroup.Store(true)
			r.s.logf("job %s: not in a cgroup of its own: %v", c.id, err)
			cmd, err = retry, nil
		} else {
			err = rerr
		}
	}
	cgPath := ""
	if cg != nil {
		cg.Close()
		cgPath = cg.Path
		if err != nil {
			_ = proc.RemoveCgroup(cgPath)
			cgPath = ""
		}
	}
	cio.closeChild() // the child has its copies
	if err != nil {
		cio.closeOurs()
		r.app.Untrack(c.id)
		return r.failStart(ctx, c, startReason(err))
	}
	pid := cmd.Process.Pid
	start, _ := proc.StartTime(pid)
	spawnerPeak := proc.SpawnerPeakKB() // after the exec (see finish)
	c.mu.Lock()
	c.pair = new(pipePair)
	c.outputs = r.openOutputs(c.id, c.pair, cio)
	c.cmd, c.stdin, c.pty = cmd, cio.in, cio.pty
	c.pid, c.pidStart, c.spawnerPeakKB, c.cgroup = pid, start, spawnerPeak, cgPath
	c.mu.Unlock()
	go r.run(c, job.Timeout, c.timeoutGrace)

	detail := cio.detail()
	if cgPath != "" {
		detail[control.CgroupKey] = cgPath
	}
	if len(detail) == 0 {
		detail = nil
	}
	running, err := r.s.db.Transition(ctx, c.id, db.Transition{
		To: vocab.StatusRunning, PID: pid, PGID: pid, PIDStart: start, Detail: detail,
	})
	if err != nil {
		// The process runs but the database did not take it: end it
		// rather than leave a job nobody can see; its runner records the
		// failure (starting → failed) once the database answers again.
		c.setEnd(vocab.StatusFailed, "record start: "+err.Error(), true)
		c.readyOnce.Do(func() { close(c.ready) })
		if _, kerr := control.End(ctx, c.target(), r.s.cfg.Grace); kerr != nil {
			r.s.logf("kill job %s: %v", c.id, kerr)
		}
		return job, fmt.Errorf("start job: %w", err)
	}
	c.mu.Lock()
	c.job = running
	c.mu.Unlock()
	c.readyOnce.Do(func() { close(c.ready) })
	return running, nil
}

// failStart records that the job could not start and runs its exit hooks
// in the background, in a goroutine counted as the child's runner.
func (r *runners) failStart(ctx context.Context, c *child, reason string) (db.Job, error) {
	job, err := r.s.db.Transition(ctx, c.id, db.Transition{To: vocab.StatusFailed, Reason: reason})
	if err != nil {
		r.drop(c, c.job)
		return c.job, fmt.Errorf("start job: %w", err)
	}
	r.complete(c, job)
	go func() {
		defer r.wg.Done()
		r.s.hooks.afterExit(job, c.baseEnv)
	}()
	return job, nil
}

// checkCwd returns why dir cannot be a working directory, or "".
func checkCwd(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Sprintf("cwd %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Sprintf("cwd %s: not a directory", dir)
	}
	return ""
}

// startReason turns an exec start error into a reason for people:
// "fork/exec /x/y: permission denied" → "/x/y: permission denied".
func startReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// limitsFor is the supervisor's limits with what req asks instead: its own
// cap on the scope, a cap on the jobs with its label.
func (s *Supervisor) limitsFor(req protocol.StartRequest) db.Limits {
	lim := s.cfg.Limits
	if req.ScopeLimit > 0 {
		lim.PerScope = req.ScopeLimit
	}
	lim.PerLabel = max(req.LabelLimit, 0)
	return lim
}

// startCreated starts the process of job, created in status starting,
// as Start does.
func (s *Supervisor) startCreated(ctx context.Context, req protocol.StartRequest, job db.Job) (db.Job, error) {
	_, argv, env, err := s.prepare(req)
	if err != nil {
		_, _ = s.db.Transition(ctx, job.ID, db.Transition{To: vocab.StatusFailed, Reason: err.Error()})
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	base := req.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	c, err := s.runners.register(job.ID, base)
	if err != nil {
		ended, terr := s.db.Transition(context.WithoutCancel(ctx), job.ID, db.Transition{To: vocab.StatusFailed, Reason: "not started: " + err.Error()})
		if terr != nil {
			return job, fmt.Errorf("start job: %w", errors.Join(err, terr))
		}
		return ended, nil
	}
	c.timeoutGrace = cmp.Or(req.TimeoutGrace, s.cfg.Grace)
	c.mu.Lock()
	c.job = job
	c.mu.Unlock()
	return s.runners.spawn(context.WithoutCancel(ctx), c, req, argv, env)
}
