package tmuxjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/tmux"
	"github.com/agentjobs/jobs/internal/vocab"
)

// EnvSocket names a private tmux server for tmux jobs: a name (tmux
// -L) or, with a '/', a socket path (tmux -S). Unset or empty means the
// user's default server, where a plain `tmux attach -t jobs-<id>` finds the
// session.
const EnvSocket = "JOBS_TMUX_SOCKET"

// SessionPrefix starts every tmux job's session name, so a person
// listing sessions recognises them.
const SessionPrefix = "jobs-"

// killWait bounds how long a kill waits for the helper to record the
// status once the pane's processes are gone. The helper notices a dead pane
// within its poll interval (package tmuxpipe); the rest is slack for a loaded machine.
const killWait = 5 * time.Second

// DefaultServer is the server tmux jobs run on when the job names none:
// $JOBS_TMUX_SOCKET's, or the user's default.
func DefaultServer() tmux.Server {
	return tmux.Server{Socket: os.Getenv(EnvSocket)}
}

// ServerOf is the tmux server job j runs on: the one recorded with
// it, or $JOBS_TMUX_SOCKET for a job recorded before the server was kept.
func ServerOf(j db.Job) tmux.Server {
	if j.TmuxSocketSet {
		return tmux.Server{Socket: j.TmuxSocket}
	}
	return DefaultServer()
}

// SessionName returns the tmux session of the job with this id.
func SessionName(jobID string) string { return SessionPrefix + jobID }

// PipeCommand is the shell command tmux runs with the pane's output on
// its stdin. The helper runs with the tmux server's environment, not ours,
// so the server it must talk to is passed along explicitly; so is the
// timeout's grace, which the helper enforces and the row does not keep.
func PipeCommand(exe, dbPath, jobID, socket string, grace time.Duration) string {
	cmd := fmt.Sprintf("%s=%s exec %s tmux-pipe --db %s --job %s",
		EnvSocket, textclean.ShellQuote(socket), textclean.ShellQuote(exe), textclean.ShellQuote(dbPath), textclean.ShellQuote(jobID))
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
func Env(env, names []string, budget int) []string {
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

// Alive reports whether the tmux job j is still its tmux-pipe helper's to
// record, so a sweep must leave it instead of marking it lost: its session
// exists, or its helper still runs. A helper closes the session of a job
// that ended before it records the end (the last of the output comes with
// the pipe's close), so a job whose session is gone may still be its
// helper's. An error other than "no such session" (a wedged tmux server)
// counts as alive: a job is not declared lost on a guess. Without tmux
// installed the session cannot exist. Where processes' arguments cannot be
// read (darwin) the helper is not looked for: the session alone decides.
func Alive(j db.Job) bool {
	if j.TmuxSession == "" {
		return false
	}
	ok, err := ServerOf(j).HasSession(j.TmuxSession)
	if ok || err != nil && !errors.Is(err, tmux.ErrNotInstalled) {
		return true
	}
	helpers, err := proc.FindByArgs("tmux-pipe", "--job", j.ID)
	return err == nil && len(helpers) > 0
}

// Kill ends a tmux job from any process, with or without its supervisor:
// it records the stop intent (killed), kills the pane's process group and
// every process tagged with the job's JOBS_ID (SIGTERM, grace, SIGKILL),
// and waits for the tmux-pipe helper to record the final status. Should no
// helper record it (the helper died), Kill records it itself. grace is the
// period itself, as control.Grace decided it (0: none). A finished job is
// AlreadyDone and nothing is signalled; its session, kept with
// --keep-tmux, stays. logf (nil: none) hears what has no caller.
func Kill(ctx context.Context, d *db.DB, job db.Job, grace time.Duration, logf func(string, ...any)) (vocab.KillResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res, err := kill(ctx, d, job, grace, logf)
	if err != nil {
		return res, fmt.Errorf("kill job %s: %w", job.ID, err)
	}
	return res, nil
}

// kill kills a tmux job, never signalling the caller of ctx or a
// supervisor, and returns once its final status is stored.
func kill(ctx context.Context, d *db.DB, job db.Job, grace time.Duration, logf func(string, ...any)) (vocab.KillResult, error) {
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
	final, err := awaitEnd(ctx, d, job, logf)
	if err != nil {
		return res, err
	}
	res.Status = final.Status
	return res, nil
}

// awaitEnd waits until job has a terminal status, which its tmux-pipe
// helper records once the pane is dead. Should the helper not do it within
// killWait (it died, or tmux closed its pipe), the status is recorded
// here from what tmux says.
func awaitEnd(ctx context.Context, d *db.DB, job db.Job, logf func(string, ...any)) (db.Job, error) {
	deadline := time.Now().Add(killWait)
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
			return recordEndHere(ctx, d, cur, logf)
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-tick.C:
		}
	}
}

// recordEndHere does the tmux-pipe helper's last step in its place:
// it records the job's end from what tmux says and closes the session
// (unless kept). The output the helper did not capture is lost.
func recordEndHere(ctx context.Context, d *db.DB, j db.Job, logf func(string, ...any)) (db.Job, error) {
	srv := ServerOf(j)
	end, err := ReadEnd(srv, j)
	if err != nil {
		return j, err
	}
	if !end.Dead && !end.Gone {
		return j, fmt.Errorf("job did not end: the command in tmux session %s still runs", j.TmuxSession)
	}
	final, err := Finish(ctx, d, j, end, logf)
	if err != nil || end.Gone {
		return final, err
	}
	if keep, kerr := d.KeepTmux(ctx, j.ID); kerr != nil || !keep {
		CloseSession(srv, j, logf)
	}
	return final, nil
}

// SendKeys sends keys to a running tmux job's pane as tmux does:
// each argument that is a key name (Enter, C-c, Up …) is pressed, any other
// is typed; with literal the text of keys is typed as is. tmux delivers
// them, so no supervisor is involved. Errors: vocab.ErrNotTmux, vocab.ErrNotRunning
// (finished, or its session has gone), vocab.ErrNoTmux, vocab.ErrInvalid for an empty
// key.
func SendKeys(j db.Job, keys []string, literal bool) error {
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
	srv := ServerOf(j)
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
	out, err := ServerOf(j).Capture(j.TmuxSession, scrollback)
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
	return ServerOf(j).AttachArgv(j.TmuxSession)
}

// Write is Write for a tmux job: the data is typed into the pane, and
// eof types C-d, what a terminal sends for end of file.
func Write(j db.Job, data []byte, eof bool) error {
	if j.Status.Terminal() {
		return fmt.Errorf("write job %s: %w", j.ID, vocab.ErrNotRunning)
	}
	srv := ServerOf(j)
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

// Signal is Signal for a tmux job: the pane's process group and the
// job's tagged processes get the signal.
func Signal(ctx context.Context, d *db.DB, j db.Job, sig string) ([]int, error) {
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

// WriteEnvFile writes env, each entry ended by a NUL, to a new file in
// dir, readable by its owner only, and returns its path. The pane's
// `jobs tmux-exec` (tmuxpipe.Exec) reads and removes it.
func WriteEnvFile(dir string, env []string) (string, error) {
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
