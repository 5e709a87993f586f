package supervisor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/vocab"
)

// tmux jobs
//
// A tmux job runs in its own session, "jobs-<id>", on the user's default
// tmux server (or the private one EnvTmuxSocket names). The supervisor only
// creates it. Everything after that is done by processes that do not need
// the supervisor, so a tmux job survives its supervisor dying:
//
//   - the tmux-pipe helper (package tmuxpipe), which tmux itself starts with
//     pipe-pane in the same command that creates the session, appends the
//     pane's output as stream pty, enforces the timeout, reads the exit
//     status once the pane is dead, records the final status and closes
//     the session;
//   - kill, signal, write and send-keys act through tmux and /proc, from
//     whichever process asks (KillTmux, SendKeysDirect and friends below);
//   - a sweep leaves a tmux job alone while its session exists
//     (tmuxJobAlive), and marks it lost once the session is gone.
//
// The stop intent of a kill or timeout is stored in the job's row
// (db.RequestStop) before the processes are signalled, because the killer
// and the helper that records the exit are different processes.

// EnvTmuxSocket names a private tmux server for tmux jobs: a name (tmux
// -L) or, with a '/', a socket path (tmux -S). Unset or empty means the
// user's default server, where a plain `tmux attach -t jobs-<id>` finds the
// session.
const EnvTmuxSocket = "JOBS_TMUX_SOCKET"

// tmuxSessionPrefix starts every tmux job's session name, so a person
// listing sessions recognises them.
const tmuxSessionPrefix = "jobs-"

// tmuxKillWait bounds how long a kill waits for the helper to record the
// status once the pane's processes are gone. The helper notices a dead pane
// within its poll interval (package tmuxpipe); the rest is slack for a loaded machine.
const tmuxKillWait = 5 * time.Second

// tmuxServer is the server tmux jobs run on.
func tmuxServer() tmux.Server {
	return tmux.Server{Socket: os.Getenv(EnvTmuxSocket)}
}

// TmuxServerOf is the tmux server job j runs on: the one recorded with
// it, or $JOBS_TMUX_SOCKET for a job recorded before the server was kept.
func TmuxServerOf(j db.Job) tmux.Server {
	if j.TmuxSocketSet {
		return tmux.Server{Socket: j.TmuxSocket}
	}
	return tmuxServer()
}

// TmuxSessionName returns the tmux session of the job with this id.
func TmuxSessionName(jobID string) string { return tmuxSessionPrefix + jobID }

// noTmuxError keeps tmux's own explanation (not installed, too old, with
// the way out) while matching vocab.ErrNoTmux.
type noTmuxError struct{ err error }

func (e *noTmuxError) Error() string        { return e.err.Error() }
func (e *noTmuxError) Unwrap() error        { return e.err }
func (e *noTmuxError) Is(target error) bool { return target == vocab.ErrNoTmux }

// tmuxError turns a tmux error about job j into the vocabulary:
// a missing tmux is vocab.ErrNoTmux, a session that has gone is vocab.ErrNotRunning.
func tmuxError(j db.Job, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tmux.ErrNotInstalled):
		return &noTmuxError{err}
	case errors.Is(err, tmux.ErrNoSession):
		return fmt.Errorf("its tmux session %s is gone: %w", j.TmuxSession, vocab.ErrNotRunning)
	}
	return err
}

// startTmux is Start for Mode "tmux": it creates the job and its session,
// whose pipe-pane runs the tmux-pipe helper, and returns the job running.
// As for pipe jobs, a job that cannot start (missing cwd, command not
// found, tmux refusing) is returned failed with a nil error; a missing
// tmux is vocab.ErrNoTmux and creates no job.
func (s *Supervisor) startTmux(ctx context.Context, req protocol.StartRequest, nj db.NewJob, argv, env []string) (db.Job, error) {
	// The caller's JOBS_TMUX_SOCKET, else ours; recorded with the job,
	// so that every later step finds the same server.
	srv := tmuxServer()
	if i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, EnvTmuxSocket+"=") }); i >= 0 {
		srv.Socket = EnvValue(env, EnvTmuxSocket)
	}
	if err := srv.Available(); err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", &noTmuxError{err})
	}
	nj.TmuxSocket = srv.Socket
	exe, err := s.executable()
	if err != nil {
		return db.Job{}, fmt.Errorf("start job: %w", err)
	}
	if req.Replace && nj.Name != "" {
		if err := s.replace(ctx, nj.Scope, nj.Name); err != nil {
			return db.Job{}, fmt.Errorf("start job: replace %q: %w", nj.Name, err)
		}
	}
	s.mu.Lock()
	opened, closing := s.opened, s.closing
	s.mu.Unlock()
	switch {
	case !opened:
		return db.Job{}, errors.New("start job: supervisor is not open")
	case closing:
		return db.Job{}, fmt.Errorf("start job: %w", vocab.ErrSupervisorClosed)
	}
	nj.TmuxSession = cmp.Or(req.TmuxPrefix, tmuxSessionPrefix) + nj.ID
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
			return s.failTmux(ctx, job, "record --keep-tmux: "+err.Error())
		}
	}
	if reason := checkCwd(job.Cwd); reason != "" {
		return s.failTmux(ctx, job, reason)
	}
	if !strings.Contains(argv[0], "/") {
		if _, err := LookPath(argv[0], EnvValue(env, "PATH"), job.Cwd); err != nil {
			return s.failTmux(ctx, job, err.Error())
		}
	}
	if len(argv) == 1 {
		// tmux runs a lone argument as a shell command line; an argv is
		// meant to run as it is, spaces and all.
		argv = []string{shell, "-c", `exec "$0"`, argv[0]}
	}
	pipe := tmuxPipeCommand(exe, s.db.Path, job.ID, srv.Socket, req.TimeoutGrace)
	// The environment goes through a file, not tmux's argv (writeEnvFile).
	envFile, err := writeEnvFile(s.runtimeDir, tmuxEnv(env, job.EnvNames, math.MaxInt))
	if err != nil {
		return s.failTmux(ctx, job, err.Error())
	}
	argv = append([]string{exe, "tmux-exec", "--env-file", envFile, "--"}, argv...)
	if err := srv.NewSession(ctx, name, job.Cwd, nil, argv, 0, 0, tmux.WithPipe(pipe)); err != nil {
		os.Remove(envFile)
		return s.failTmux(ctx, job, err.Error())
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

// failTmux records that a tmux job could not start and runs its exit
// hooks in the background, owned by wg.
func (s *Supervisor) failTmux(ctx context.Context, job db.Job, reason string) (db.Job, error) {
	failed, err := s.db.Transition(ctx, job.ID, db.Transition{To: vocab.StatusFailed, Reason: reason})
	if err != nil {
		return job, fmt.Errorf("start job: %w", err)
	}
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if !closing {
		go func() {
			defer s.wg.Done()
			s.afterExit(failed, nil)
		}()
	}
	return failed, nil
}

// executable is the jobs binary, which tmux runs as the tmux-pipe helper.
func (s *Supervisor) executable() (string, error) {
	if s.cfg.Executable != "" {
		return s.cfg.Executable, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find jobs executable for the tmux helper: %w", err)
	}
	return exe, nil
}

// tmuxPipeCommand is the shell command tmux runs with the pane's output on
// its stdin. The helper runs with the tmux server's environment, not ours,
// so the server it must talk to is passed along explicitly; so is the
// timeout's grace, which the helper enforces and the row does not keep.
func tmuxPipeCommand(exe, dbPath, jobID, socket string, grace time.Duration) string {
	cmd := fmt.Sprintf("%s=%s exec %s tmux-pipe --db %s --job %s",
		EnvTmuxSocket, textclean.ShellQuote(socket), textclean.ShellQuote(exe), textclean.ShellQuote(dbPath), textclean.ShellQuote(jobID))
	if grace > 0 {
		cmd += " --grace " + grace.String()
	}
	return cmd
}

// tmuxEnv picks the job environment entries the pane gets (through
// tmux-exec's file).
//
// TERM, TMUX and TMUX_PANE are left out: in the pane, TERM must describe
// tmux's terminal, which tmux sets, and TMUX would point programs in the
// pane at whatever server the caller ran inside. Everything else is passed
// when it fits in budget bytes, the tmux client's limit for one command;
// when it does not, the job's own additions (names), JOBS_* and PATH are
// kept and the largest of the rest are left to the tmux server's
// environment, which panes inherit anyway.
func tmuxEnv(env, names []string, budget int) []string {
	must := func(k string) bool {
		return k == "PATH" || strings.HasPrefix(k, "JOBS_") || slices.Contains(names, k)
	}
	var keep []string
	var rest []string
	used := 0
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "TERM" || k == "TMUX" || k == "TMUX_PANE":
		case must(k):
			keep = append(keep, kv)
			used += len(kv) + 4 // "-e" and separators
		default:
			rest = append(rest, kv)
		}
	}
	// Smallest first: many small variables matter more than one huge
	// LS_COLORS.
	slices.SortStableFunc(rest, func(a, b string) int { return len(a) - len(b) })
	for _, kv := range rest {
		if used+len(kv)+4 > budget {
			break
		}
		keep = append(keep, kv)
		used += len(kv) + 4
	}
	// Back in the order of env, so the result reads like it.
	pos := make(map[string]int, len(env))
	for i, kv := range env {
		pos[kv] = i
	}
	slices.SortStableFunc(keep, func(a, b string) int { return pos[a] - pos[b] })
	return keep
}

// tmuxJobAlive reports whether the tmux job j still has its session, so a
// sweep must leave it to its tmux-pipe helper instead of marking it lost.
// An error other than "no such session" (a wedged tmux server) counts as
// alive: a job is not declared lost on a guess. Without tmux installed the
// session cannot exist.
func tmuxJobAlive(j db.Job) bool {
	if j.TmuxSession == "" {
		return false
	}
	ok, err := TmuxServerOf(j).HasSession(j.TmuxSession)
	if errors.Is(err, tmux.ErrNotInstalled) {
		return false
	}
	return ok || err != nil
}

// KillTmux ends a tmux job from any process, with or without its
// supervisor: it records the stop intent (killed), kills the pane's process
// group and every process tagged with the job's JOBS_ID (SIGTERM, grace,
// SIGKILL), and waits for the tmux-pipe helper to record the final status.
// Should no helper record it (the helper died), KillTmux records it
// itself. grace is the period itself, as control.Grace decided it (0:
// none). A finished job is AlreadyDone and nothing is signalled; its
// session, kept with --keep-tmux, stays.
func KillTmux(ctx context.Context, d *db.DB, job db.Job, grace time.Duration) (vocab.KillResult, error) {
	res, err := killTmux(ctx, d, job, grace, func(string, ...any) {})
	if err != nil {
		return res, fmt.Errorf("kill job %s: %w", job.ID, err)
	}
	return res, nil
}

// killTmux kills a tmux job, never signalling the caller of ctx or a
// supervisor, and returns once its final status is stored.
func killTmux(ctx context.Context, d *db.DB, job db.Job, grace time.Duration, logf func(string, ...any)) (vocab.KillResult, error) {
	res := vocab.KillResult{JobID: job.ID, Status: job.Status, Signalled: []int{}, Survivors: []int{}}
	if job.Status.Terminal() {
		res.AlreadyDone = true
		return res, nil
	}
	if err := d.RequestStop(ctx, job.ID, vocab.StatusKilled); err != nil {
		return res, err
	}
	// Without a start time to check the pane's pid against (the job is
	// still starting, or /proc could not tell) only its tagged processes
	// are found: proc.Target proves nothing else.
	t := control.Target(ctx, d, job)
	// The kill must finish its escalation even if the caller goes away.
	kr, err := control.End(context.WithoutCancel(ctx), t, grace)
	res.Signalled, res.Survivors, res.Escalated = kr.Signalled, kr.Survivors, kr.Escalated
	if err != nil {
		return res, err
	}
	final, err := awaitTmuxEnd(ctx, d, job, logf)
	if err != nil {
		return res, err
	}
	res.Status = final.Status
	return res, nil
}

// awaitTmuxEnd waits until job has a terminal status, which its tmux-pipe
// helper records once the pane is dead. Should the helper not do it within
// tmuxKillWait (it died, or tmux closed its pipe), the status is recorded
// here from what tmux says.
func awaitTmuxEnd(ctx context.Context, d *db.DB, job db.Job, logf func(string, ...any)) (db.Job, error) {
	deadline := time.Now().Add(tmuxKillWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := d.FindJobByID(ctx, job.ID)
		if err != nil {
			return job, err
		}
		if cur.Status.Terminal() {
			return cur, nil
		}
		if time.Now().After(deadline) {
			return recordTmuxEndHere(ctx, d, cur, logf)
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-tick.C:
		}
	}
}

// recordTmuxEndHere does the tmux-pipe helper's last step in its place:
// it records the job's end from what tmux says and closes the session
// (unless kept). The output the helper did not capture is lost.
func recordTmuxEndHere(ctx context.Context, d *db.DB, j db.Job, logf func(string, ...any)) (db.Job, error) {
	srv := TmuxServerOf(j)
	end, err := ReadTmuxEnd(srv, j)
	if err != nil {
		return j, err
	}
	if !end.Dead && !end.Gone {
		return j, fmt.Errorf("job did not end: the command in tmux session %s still runs", j.TmuxSession)
	}
	final, err := FinishTmux(ctx, d, j, end, logf)
	if err != nil || end.Gone {
		return final, err
	}
	if keep, kerr := d.KeepTmux(ctx, j.ID); kerr != nil || !keep {
		CloseTmuxSession(srv, j, logf)
	}
	return final, nil
}

// SendKeysDirect sends keys to a running tmux job's pane as tmux does:
// each argument that is a key name (Enter, C-c, Up …) is pressed, any other
// is typed; with literal the text of keys is typed as is. tmux delivers
// them, so no supervisor is involved. Errors: vocab.ErrNotTmux, vocab.ErrNotRunning
// (finished, or its session has gone), vocab.ErrNoTmux, vocab.ErrInvalid for an empty
// key.
func SendKeysDirect(j db.Job, keys []string, literal bool) error {
	if err := sendKeys(j, keys, literal); err != nil {
		return fmt.Errorf("send keys to job %s: %w", j.ID, err)
	}
	return nil
}

func sendKeys(j db.Job, keys []string, literal bool) error {
	switch {
	case j.Mode != vocab.ModeTmux:
		return vocab.ErrNotTmux
	case j.Status.Terminal():
		return fmt.Errorf("it is %s: %w", j.Status, vocab.ErrNotRunning)
	case len(keys) == 0:
		return invalid(errors.New("no keys given"))
	}
	srv := TmuxServerOf(j)
	if literal {
		return tmuxError(j, srv.SendLiteral(j.TmuxSession, strings.Join(keys, "")))
	}
	// tmux's own rule: an argument that is a key name is pressed, any
	// other is typed. Runs of key names go in one send-keys, so keys
	// reach the pane in the order given.
	for len(keys) > 0 {
		if keys[0] == "" {
			return invalid(errors.New("empty key: give a key name such as Enter or text to type"))
		}
		n := 0
		for n < len(keys) && keys[n] != "" && parse.ValidateKey(keys[n]) == nil {
			n++
		}
		var err error
		if n > 0 {
			err = srv.SendKeys(j.TmuxSession, keys[:n]...)
		} else {
			n = 1
			err = srv.SendLiteral(j.TmuxSession, keys[0])
		}
		if err != nil && !errors.Is(err, tmux.ErrNoSession) && !errors.Is(err, tmux.ErrNotInstalled) {
			return invalid(err)
		}
		if err != nil {
			return tmuxError(j, err)
		}
		keys = keys[n:]
	}
	return nil
}

// Capture returns the screen of a tmux job's pane as clean text, with up
// to scrollback lines of history above it (negative: all of it). A
// finished job whose session was kept (--keep-tmux) can still be read.
// Errors: vocab.ErrNotTmux, vocab.ErrNotRunning (its session is gone), vocab.ErrNoTmux.
func Capture(j db.Job, scrollback int) (string, error) {
	if j.Mode != vocab.ModeTmux {
		return "", fmt.Errorf("capture job %s: %w", j.ID, vocab.ErrNotTmux)
	}
	out, err := TmuxServerOf(j).Capture(j.TmuxSession, scrollback)
	if errors.Is(err, tmux.ErrNoSession) && j.Status.Terminal() {
		return "", fmt.Errorf("capture job %s: it is %s and its tmux session is closed (start it with --keep-tmux to keep it): %w", j.ID, j.Status, vocab.ErrNotRunning)
	}
	if err != nil {
		return "", fmt.Errorf("capture job %s: %w", j.ID, tmuxError(j, err))
	}
	return out, nil
}

// AttachArgv returns the command line that attaches a terminal to a tmux
// job's session (argv[0] is tmux), or nil for a job that is not a tmux
// job. Run from inside another tmux, it needs TMUX removed from its
// environment.
func AttachArgv(j db.Job) []string {
	if j.Mode != vocab.ModeTmux || j.TmuxSession == "" {
		return nil
	}
	return TmuxServerOf(j).AttachArgv(j.TmuxSession)
}

// killTmux is Kill for a tmux job, which any supervisor can do.
func (s *Supervisor) killTmux(ctx context.Context, job db.Job, grace time.Duration) (vocab.KillResult, error) {
	res, err := killTmux(ctx, s.db, job, grace, s.logf)
	if err != nil {
		return res, fmt.Errorf("kill job %s: %w", job.ID, err)
	}
	return res, nil
}

// writeTmux is Write for a tmux job: the data is typed into the pane, and
// eof types C-d, what a terminal sends for end of file.
func writeTmux(j db.Job, data []byte, eof bool) error {
	if j.Status.Terminal() {
		return fmt.Errorf("write job %s: %w", j.ID, vocab.ErrNotRunning)
	}
	srv := TmuxServerOf(j)
	if len(data) > 0 {
		if err := srv.SendLiteral(j.TmuxSession, string(data)); err != nil {
			return fmt.Errorf("write job %s: %w", j.ID, tmuxError(j, err))
		}
	}
	if eof {
		if err := srv.SendKeys(j.TmuxSession, "C-d"); err != nil {
			return fmt.Errorf("write job %s: %w", j.ID, tmuxError(j, err))
		}
	}
	return nil
}

// signalTmux is Signal for a tmux job: the pane's process group and the
// job's tagged processes get the signal.
func signalTmux(ctx context.Context, d *db.DB, j db.Job, sig string) ([]int, error) {
	if j.Status.Terminal() {
		return nil, fmt.Errorf("signal job %s: %w", j.ID, vocab.ErrNotRunning)
	}
	sn, err := vocab.ParseSignal(sig)
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", j.ID, invalid(err))
	}
	pids, err := control.Send(control.Target(ctx, d, j), sn)
	if err != nil {
		return pids, fmt.Errorf("signal job %s: %w", j.ID, err)
	}
	return pids, nil
}

// writeEnvFile writes env, each entry ended by a NUL, to a new file in
// dir, readable by its owner only, and returns its path. The pane's
// `jobs tmux-exec` (tmuxpipe.Exec) reads and removes it.
func writeEnvFile(dir string, env []string) (string, error) {
	f, err := privfile.CreateTemp("job environment", dir, "tmux-env-*")
	if err != nil {
		return "", fmt.Errorf("write job environment: %w", err)
	}
	var b bytes.Buffer
	for _, kv := range env {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write job environment: %w", err)
	}
	return f.Name(), nil
}
