package supervisor

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
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/sigreset"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
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
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(s.ctx), FinalWriteTimeout)
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
	started, err := sigreset.Wrap(cmd)
	if err == nil {
		err = s.reaper.StartCmd(cmd)
		if serr := started(); err == nil {
			err = cmd.Wait()
			s.reaper.Disown(cmd.Process.Pid)
			if serr != nil {
				err = serr
			}
		}
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
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(s.ctx), FinalWriteTimeout)
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
		protocol.EnvJobID + "=" + job.ID,
		protocol.EnvScope + "=" + job.Scope,
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

// deadSupervisors returns the supervisors that died unnoticed: not
// recorded as ended, their lock free. The jobs they saw end may have hooks
// nobody claimed (see runDueHooks), which records them as ended.
func (s *Supervisor) deadSupervisors(ctx context.Context) []db.Supervisor {
	sups, err := s.db.OpenSupervisors(ctx)
	if err != nil {
		s.logf("%v", err)
		return nil
	}
	var dead []db.Supervisor
	for _, sup := range sups {
		if sup.ID != s.id && !protocol.SupervisorAlive(sup) {
			dead = append(dead, sup)
		}
	}
	return dead
}

// runDueHooks starts, in the background, the on_exit hooks that are due
// and that nobody ran: those of jobs that ended while no supervisor ran
// to run them. Reads record jobs lost and start nothing (see pkg/jobs), so
// those hooks wait in the database for a supervisor: the next one to open
// runs them, and a running one's janitor each round.
//
// Due are the hooks of lost jobs and, given the supervisors that died
// unnoticed (dead), those of the pipe jobs they recorded the end of and
// died before claiming the hook; dead are then recorded as ended, so that
// the next supervisor does not look again. (A tmux job's hook is its
// tmux-pipe helper's, which needs no supervisor.) Each hook runs once
// however many supervisors find it: runHook claims it in the database
// first (db.ClaimHook).
func (s *Supervisor) runDueHooks(ctx context.Context, dead []db.Supervisor) {
	lost, err := s.db.PendingHooks(ctx, s.db.Now().Add(-s.cfg.EventRetention))
	if err != nil {
		s.logf("%v", err)
	}
	for _, j := range lost {
		s.hookLost(j)
	}
	if len(dead) == 0 {
		return
	}
	ids := map[string]bool{}
	since := dead[0].StartedAt
	for _, sup := range dead {
		ids[sup.ID] = true
		if sup.StartedAt.Before(since) {
			since = sup.StartedAt
		}
	}
	ended, err := s.db.PendingEndedHooks(ctx, since)
	if err != nil {
		s.logf("%v", err)
		return
	}
	for _, j := range ended {
		if ids[j.SupervisorID] && j.Mode != vocab.ModeTmux {
			s.hookLost(j)
		}
	}
	for _, sup := range dead {
		if err := s.db.EndSupervisor(ctx, sup.ID); err != nil {
			s.logf("%v", err)
		}
	}
}
