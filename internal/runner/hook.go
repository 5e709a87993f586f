package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/textclean"
)

// hookTailChars is how much cleaned output JOBS_OUTPUT_TAIL carries.
const hookTailChars = 2000

// afterExit runs what waits for a job's end: Config.OnExit and the job's
// on_exit command. Neither can change the job.
func (s *Supervisor) afterExit(job db.Job, baseEnv []string) {
	if s.cfg.OnExit != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.logf("on-exit callback for job %s panicked: %v", job.ID, r)
				}
			}()
			s.cfg.OnExit(job)
		}()
	}
	if job.OnExit != "" {
		s.runHook(job, baseEnv)
	}
}

// hookLost runs the on_exit command of a job this supervisor did not see
// end (it marked it lost, or found its hook due: see runDueHooks), in a
// goroutine owned by wg. Config.OnExit is not called: the job was not this
// supervisor's.
func (s *Supervisor) hookLost(job db.Job) {
	if job.OnExit == "" {
		return
	}
	// Counting the goroutine under mu while not closing orders the Add
	// before shutdown's wg.Wait.
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closing {
		s.logf("on-exit hook of job %s skipped: supervisor closing", job.ID)
		return
	}
	go func() {
		defer s.wg.Done()
		s.runHook(job, nil)
	}()
}

// runHook runs the job's on_exit command with `/bin/sh -c`, the job's
// facts in its environment, bounded by HookTimeout (then its process
// group is killed), and records the outcome as a 'hook' event.
//
// A hook runs once per job whoever notices the job's end: the claim in the
// database decides between this supervisor and any other that found the
// same lost job.
func (s *Supervisor) runHook(job db.Job, baseEnv []string) {
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(s.ctx), finalWriteTimeout)
	won, err := s.db.ClaimHook(cctx, job.ID, job.Scope)
	ccancel()
	if err != nil {
		s.logf("on-exit hook of job %s: %v", job.ID, err)
		return
	}
	if !won {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.cfg.HookTimeout)
	defer cancel()
	if baseEnv == nil {
		baseEnv = environ()
	}
	env := append(append([]string(nil), baseEnv...), hookEnv(job, s.outputTail(ctx, job.ID))...)

	cmd := exec.CommandContext(ctx, shell, "-c", job.OnExit)
	cmd.Env = dedupEnv(env)
	cmd.Dir = job.Cwd
	if checkCwd(job.Cwd) != "" {
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

	start := timeNow()
	err = s.reaper.StartCmd(cmd)
	if err == nil {
		err = cmd.Wait()
		s.reaper.Disown(cmd.Process.Pid)
	}
	detail := map[string]any{
		"state":       "finished",
		"ok":          err == nil,
		"duration_ms": timeNow().Sub(start).Milliseconds(),
	}
	if err != nil {
		detail["error"] = err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code, sig := exitStatus(ee.ProcessState)
			detail["exit_code"] = code
			if sig != "" {
				detail["signal"] = sig
			}
		}
		if ctx.Err() != nil {
			detail["timed_out"] = true
			detail["error"] = "killed after " + s.cfg.HookTimeout.String()
		}
		s.logf("on-exit hook of job %s: %v", job.ID, err)
	}
	if t := strings.TrimSpace(out.String()); t != "" {
		detail["output"] = t
	}
	if out.cut > 0 {
		detail["output_cut_bytes"] = out.cut
	}
	raw, _ := json.Marshal(detail)
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(s.ctx), finalWriteTimeout)
	defer ecancel()
	if _, err := s.db.AddEvent(ectx, db.Event{JobID: job.ID, Scope: job.Scope, Kind: "hook", Detail: raw}); err != nil {
		s.logf("record hook of job %s: %v", job.ID, err)
	}
}

// hookEnv is what an on_exit command learns about the job.
func hookEnv(job db.Job, tail string) []string {
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
		EnvJobID + "=" + job.ID,
		EnvScope + "=" + job.Scope,
		"JOBS_NAME=" + job.Name,
		"JOBS_STATUS=" + string(job.Status),
		"JOBS_EXIT_CODE=" + code,
		"JOBS_SIGNAL=" + job.Signal,
		"JOBS_DURATION_MS=" + strconv.FormatInt(dur.Milliseconds(), 10),
		"JOBS_OUTPUT_TAIL=" + tail,
	}
}

// outputTail returns the last hookTailChars characters of the job's output,
// cleaned of escapes and carriage-return redraws. An environment string
// cannot hold NUL, so those are dropped.
func (s *Supervisor) outputTail(ctx context.Context, jobID string) string {
	// Read more than needed: cleaning shrinks the text.
	page, err := logs.Tail(ctx, s.db, jobID, 4*hookTailChars, logs.Chars, logs.Filter{})
	if err != nil {
		return ""
	}
	text := strings.ReplaceAll(textclean.Clean(page.Data), "\x00", "")
	text, _ = textclean.TailChars(text, hookTailChars)
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

// tmuxHookGrace is how long after a tmux job's end its hook is left to
// the tmux-pipe helper that recorded the end (it claims the hook at once;
// the helper is no supervisor, so no lock tells whether it still lives).
const tmuxHookGrace = time.Minute

// runDueHooks starts, in the background, the on_exit hooks that are due
// and that nobody ran: those of jobs that ended while no supervisor ran
// to run them. Reads record jobs lost and start nothing (see pkg/jobs),
// so those hooks wait in the database for a supervisor: the next one to
// start runs them on opening (ended set: every hook due), and a running
// one's janitor those of lost jobs each round.
//
// A hook is due when the job is lost, or when the supervisor that ran the
// job is gone (its lock is free) and so died between recording the end
// and claiming the hook. Each runs once however many supervisors find it:
// runHook claims it in the database first (db.ClaimHook).
func (s *Supervisor) runDueHooks(ctx context.Context, ended bool) {
	jobs, err := s.db.PendingHooks(ctx, s.db.Now().Add(-s.cfg.EventRetention), !ended)
	if err != nil {
		s.logf("%v", err)
		return
	}
	gone := map[string]bool{} // supervisor id → its lock is free
	for _, j := range jobs {
		if j.Status == db.StatusLost || s.supervisorGone(ctx, j, gone) {
			s.hookLost(j)
		}
	}
}

// supervisorGone reports whether the supervisor of the finished job j is
// gone, so that the hook of j is nobody's but ours to run. gone caches the
// answers of one pass.
func (s *Supervisor) supervisorGone(ctx context.Context, j db.Job, gone map[string]bool) bool {
	if j.SupervisorID == s.id {
		return false // ours: run when we recorded the end
	}
	if j.Mode == "tmux" && (j.EndedAt == nil || s.db.Now().Sub(*j.EndedAt) < tmuxHookGrace) {
		return false
	}
	g, ok := gone[j.SupervisorID]
	if !ok {
		sup, err := s.db.FindSupervisor(ctx, j.SupervisorID)
		switch {
		case errors.Is(err, db.ErrNotFound):
			g = true
		case err != nil:
			s.logf("on-exit hook of job %s: %v", j.ID, err)
			g = false
		default:
			g = !SupervisorAlive(sup)
		}
		gone[j.SupervisorID] = g
	}
	return g
}
