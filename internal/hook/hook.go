// Package hook runs a job's on_exit command once the job has ended: in its
// supervisor, in the supervisor that finds it due, or in the helper that
// records a tmux job's end. Whoever runs it, the claim in the database
// (db.ClaimHook) makes it run once.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/sigreset"
	"github.com/agentjobs/jobs/internal/textclean"
)

// DefaultTimeout bounds an on-exit hook; it is killed after it.
const DefaultTimeout = 60 * time.Second

// tailChars is how much cleaned output JOBS_OUTPUT_TAIL carries.
const tailChars = 2000

// shell runs the on_exit command line.
const shell = "/bin/sh"

// A Runner runs on_exit commands against one database.
type Runner struct {
	DB *db.DB
	// Timeout bounds each hook (DefaultTimeout when 0); then its process
	// group is killed.
	Timeout time.Duration
	// Reaper owns each hook's pid while it is waited for, so that a
	// subreaper's orphan reaping never takes the status Wait needs. A
	// Reaper that was never started only does that.
	Reaper *proc.Reaper
	// Logf receives what has no caller to return to; nil discards it.
	Logf func(format string, args ...any)
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// Run runs the job's on_exit command with `/bin/sh -c`, the job's facts in
// its environment (over baseEnv, or this process's environment when nil),
// bounded by Timeout, and records the outcome as a 'hook' event. It does
// nothing when the job has no hook or another process claimed it. ctx
// gives values only: a hook and its record must land whatever happens to
// the caller.
func (r *Runner) Run(ctx context.Context, job db.Job, baseEnv []string) {
	if job.OnExit == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	cctx, ccancel := context.WithTimeout(ctx, db.FinalWriteTimeout)
	won, err := r.DB.ClaimHook(cctx, job.ID, job.Scope)
	ccancel()
	if err != nil {
		r.logf("on-exit hook of job %s: %v", job.ID, err)
		return
	}
	if !won {
		return
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if baseEnv == nil {
		baseEnv = os.Environ()
	}
	env := append(append([]string(nil), baseEnv...), Env(job, r.outputTail(hctx, job.ID))...)

	cmd := exec.CommandContext(hctx, shell, "-c", job.OnExit)
	cmd.Env = parse.DedupEnv(env)
	cmd.Dir = job.Cwd
	if fi, err := os.Stat(job.Cwd); err != nil || !fi.IsDir() {
		cmd.Dir = "/"
	}
	// The hook's own output (stdout and stderr, in order, its last
	// tailBufferMax bytes) goes into its event, so that a hook that
	// prints why it did nothing can be read afterwards.
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A hook that backgrounds something holding stderr must not keep us.
	cmd.WaitDelay = 2 * time.Second

	start := time.Now()
	started, err := sigreset.Wrap(cmd)
	if err == nil {
		err = r.Reaper.StartCmd(cmd)
		if serr := started(); err == nil {
			err = cmd.Wait()
			r.Reaper.Disown(cmd.Process.Pid)
			if serr != nil {
				err = serr
			}
		}
	}
	detail := map[string]any{
		"state":       "finished",
		"ok":          err == nil,
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if err != nil {
		detail["error"] = err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code, sig := proc.ExitStatus(ee.ProcessState)
			detail["exit_code"] = code
			if sig != "" {
				detail["signal"] = sig
			}
		}
		if hctx.Err() != nil {
			detail["timed_out"] = true
			detail["error"] = "killed after " + timeout.String()
		}
		r.logf("on-exit hook of job %s: %v", job.ID, err)
	}
	if t := strings.TrimSpace(out.String()); t != "" {
		detail["output"] = t
	}
	if out.cut > 0 {
		detail["output_cut_bytes"] = out.cut
	}
	raw, _ := json.Marshal(detail)
	ectx, ecancel := context.WithTimeout(ctx, db.FinalWriteTimeout)
	defer ecancel()
	if _, err := r.DB.AddEvent(ectx, db.Event{JobID: job.ID, Scope: job.Scope, Kind: "hook", Detail: raw}); err != nil {
		r.logf("record hook of job %s: %v", job.ID, err)
	}
}

// Env is what an on_exit command learns about the job; tail is the end of
// its output.
func Env(job db.Job, tail string) []string {
	code := ""
	if job.ExitCode != nil {
		code = strconv.Itoa(*job.ExitCode)
	}
	dur := job.Duration // monotonic, when the supervisor measured it
	if dur == 0 && job.EndedAt != nil {
		from := job.CreatedAt
		if job.StartedAt != nil {
			from = *job.StartedAt
		}
		dur = job.EndedAt.Sub(from)
	}
	return []string{
		protocol.EnvJobID + "=" + job.ID,
		protocol.EnvHookOf + "=" + job.ID,
		protocol.EnvScope + "=" + job.Scope,
		"JOBS_NAME=" + job.Name,
		"JOBS_STATUS=" + string(job.Status),
		"JOBS_EXIT_CODE=" + code,
		"JOBS_SIGNAL=" + job.Signal,
		"JOBS_DURATION_MS=" + strconv.FormatInt(dur.Milliseconds(), 10),
		"JOBS_OUTPUT_TAIL=" + tail,
	}
}

// outputTail returns the last tailChars characters of the job's output,
// cleaned of escapes and carriage-return redraws. An environment string
// cannot hold NUL, so those are dropped.
func (r *Runner) outputTail(ctx context.Context, jobID string) string {
	// Read more than needed: cleaning shrinks the text.
	page, err := logs.Tail(ctx, r.DB, jobID, 4*tailChars, logs.Chars, logs.Filter{})
	if err != nil {
		return ""
	}
	text := strings.ReplaceAll(textclean.Clean(page.Data), "\x00", "")
	text, _ = textclean.TailChars(text, tailChars)
	return text
}

// tailBuffer keeps the last bytes written to it and counts the ones it
// let go.
type tailBuffer struct {
	b   []byte
	cut int64
}

const tailBufferMax = 2000

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailBufferMax {
		t.cut += int64(len(t.b) - tailBufferMax)
		t.b = append(t.b[:0], t.b[len(t.b)-tailBufferMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
