package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// tmuxStarter creates the supervisor's tmux jobs. It is no service: a
// supervisor only creates a tmux job (see package tmuxjob); once its
// session runs, the job's tmux-pipe helper records it, and any process can
// act on it. Nothing of a tmux job runs in the supervisor, so there is
// nothing to start or stop, nor to take over from a supervisor that died:
// its sweep leaves a job whose session lives to its helper (tmuxjob.Alive).
type tmuxStarter struct {
	s *Supervisor
}

// start is Start for Mode "tmux": it creates the job and its session,
// whose pipe-pane runs the tmux-pipe helper, and returns the job running.
// As for pipe jobs, a job that cannot start (missing cwd, command not
// found, tmux refusing) is returned failed with a nil error; a missing
// tmux is vocab.ErrNoTmux and creates no job.
func (t *tmuxStarter) start(ctx context.Context, req protocol.StartRequest, nj db.NewJob, argv, env []string) (db.Job, error) {
	s := t.s
	// The caller's JOBS_TMUX_SOCKET, else ours; recorded with the job,
	// so that every later step finds the same server.
	srv := tmuxjob.DefaultServer()
	if i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, tmuxjob.EnvSocket+"=") }); i >= 0 {
		srv.Socket = parse.EnvValue(env, tmuxjob.EnvSocket)
	}
	if err := srv.Available(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", tmuxjob.NoTmux(err))
	}
	nj.TmuxSocket = srv.Socket
	exe, err := t.executable()
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	if req.Replace && nj.Name != "" {
		if err := s.replace(ctx, nj.Scope, nj.Name); err != nil {
			return db.Job{}, fmt.Errorf("start job: replace %q: %w", nj.Name, err)
		}
	}
	if err := s.takingJobs(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	nj.TmuxSession = cmp.Or(req.TmuxPrefix, tmuxjob.SessionPrefix) + nj.ID
	job, err := s.db.CreateJob(ctx, nj, s.limitsFor(req))
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	// The job exists now: whatever happens to the caller, it must end up
	// running or failed, never stuck in starting.
	ctx = context.WithoutCancel(ctx)
	name := job.TmuxSession

	if req.KeepTmux {
		if err := s.db.SetKeepTmux(ctx, job.ID, true); err != nil {
			return t.fail(ctx, job, "record --keep-tmux: "+err.Error())
		}
	}
	if reason := checkCwd(job.Cwd); reason != "" {
		return t.fail(ctx, job, reason)
	}
	if !strings.Contains(argv[0], "/") {
		if _, err := proc.LookPath(argv[0], parse.EnvValue(env, "PATH"), job.Cwd); err != nil {
			return t.fail(ctx, job, err.Error())
		}
	}
	if len(argv) == 1 {
		// tmux runs a lone argument as a shell command line; an argv is
		// meant to run as it is, spaces and all.
		argv = []string{shell, "-c", `exec "$0"`, argv[0]}
	}
	pipe := tmuxjob.PipeCommand(exe, s.db.Path, job.ID, srv.Socket, req.TimeoutGrace)
	// The environment goes through a file, not tmux's argv (writeEnvFile).
	envFile, err := tmuxjob.WriteEnvFile(s.addr.runtimeDir, tmuxjob.Env(env, job.EnvNames, math.MaxInt))
	if err != nil {
		return t.fail(ctx, job, err.Error())
	}
	argv = append([]string{exe, "tmux-exec", "--env-file", envFile, "--"}, argv...)
	if err := srv.NewSession(ctx, name, job.Cwd, nil, argv, 0, 0, tmux.WithPipe(pipe)); err != nil {
		os.Remove(envFile)
		return t.fail(ctx, job, err.Error())
	}
	pid, err := srv.PanePID(name)
	if err != nil {
		// The session went away at once (killed by hand, or the server
		// died); the helper saw its pipe close and records the job
		// lost, or will.
		s.logf("job %s: %v", job.ID, err)
		return s.db.FindJobByID(ctx, job.ID)
	}
	start, _ := proc.StartTime(pid)
	running, err := s.db.Transition(ctx, job.ID, db.Transition{
		To: vocab.StatusRunning, PID: pid, PGID: pid, PIDStart: start,
		Detail: map[string]any{"tmux_session": name},
	})
	if errors.Is(err, vocab.ErrInvalidTransition) {
		// Already ended: killed while starting, or its helper recorded
		// it. The stored row tells.
		return s.db.FindJobByID(ctx, job.ID)
	}
	if err != nil {
		// The command runs but the database did not take it: end it
		// rather than leave a job nobody can see. Its helper records the
		// end once the database answers again.
		if kerr := srv.KillSession(name); kerr != nil {
			s.logf("kill tmux session of job %s: %v", job.ID, kerr)
		}
		return job, fmt.Errorf("start job: %w", err)
	}
	return running, nil
}

// fail records that a tmux job could not start and runs its exit
// hooks in the background (hooks.goAfterExit).
func (t *tmuxStarter) fail(ctx context.Context, job db.Job, reason string) (db.Job, error) {
	s := t.s
	failed, err := s.db.Transition(ctx, job.ID, db.Transition{To: vocab.StatusFailed, Reason: reason})
	if err != nil {
		return job, fmt.Errorf("start job: %w", err)
	}
	s.hooks.goAfterExit(failed)
	return failed, nil
}

// executable is the jobs binary, which tmux runs as the tmux-pipe helper.
func (t *tmuxStarter) executable() (string, error) {
	if t.s.cfg.Executable != "" {
		return t.s.cfg.Executable, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find jobs executable for the tmux helper: %w", err)
	}
	return exe, nil
}
