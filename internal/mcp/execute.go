package mcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// executeResult is execute_command's structured result: OpenClaw's
// status, sessionId, exitCode and output (a string), then what jobs adds.
type executeResult struct {
	Status          string      `json:"status"`
	SessionID       string      `json:"sessionId"`
	ExitCode        *int        `json:"exitCode,omitempty"`
	Output          *string     `json:"output,omitempty"`
	Name            string      `json:"name,omitempty"`
	Signal          string      `json:"signal,omitempty"`
	Reason          string      `json:"reason,omitempty"`
	RuntimeMs       int64       `json:"runtime_ms"`
	WaitingForInput bool        `json:"waiting_for_input"`
	OutputInfo      *outputView `json:"output_info,omitempty"`
	Offloaded       bool        `json:"offloaded,omitempty"`
	OutputFilePath  string      `json:"outputFilePath,omitempty"`
	Note            string      `json:"note,omitempty"`
	Queued          bool        `json:"queued,omitempty"`
	Queue           string      `json:"queue,omitempty"`
	QueuePosition   int         `json:"queue_position,omitempty"`
}

// maxSeconds bounds durations given in seconds (about 30 years), so that
// converting them cannot overflow.
const maxSeconds = 1e9

// The documents' bounds on execute_command's arguments:
// timeout z.number().min(100) (milliseconds) and description
// z.string().min(5).max(100).
const (
	minTimeoutMs   = 100
	minDescription = 5
	maxDescription = 100
)

func seconds(name string, v float64) (time.Duration, error) {
	if v < 0 || v > maxSeconds || math.IsNaN(v) {
		return 0, argError("%s must be between 0 and %g seconds, got %g", name, float64(maxSeconds), v)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func (s *server) execute(ctx context.Context, req *sdk.CallToolRequest, in executeInput) (*sdk.CallToolResult, any, error) {
	spec, err := specFor(in)
	if err != nil {
		return nil, nil, err
	}
	spec.TTL = s.ttl
	window := s.yield
	if in.YieldMs != nil {
		if *in.YieldMs < 0 {
			return nil, nil, argError("yieldMs must not be negative, got %d", *in.YieldMs)
		}
		window = time.Duration(min(int64(*in.YieldMs), int64(maxSeconds)*1000)) * time.Millisecond
	}
	var notes []string
	if window > s.bound {
		if in.YieldMs != nil {
			notes = append(notes, fmt.Sprintf("yieldMs capped at %d (the call bound)", s.bound.Milliseconds()))
		}
		window = s.bound
	}
	if in.Background || in.RunInBackground {
		window = 0
	}

	job, err := s.c.Start(ctx, spec)
	if err != nil && ctx.Err() != nil && job.ID != "" {
		// Cancelled while the job was being started: Start ended it.
		return nil, nil, s.cancelled(ctx, req, job)
	}
	if err != nil {
		if errors.Is(err, jobs.ErrNameTaken) {
			return nil, nil, fmt.Errorf("%w (pass replace=true to end it and start again, or pick another name)", err)
		}
		return nil, nil, describe("", err)
	}
	if s.off != nil {
		s.off.watch(ctx, job.ID)
	}
	reason := jobs.WaitReason("")
	if window > 0 && !job.Status.Terminal() {
		wr, err := s.c.Wait(ctx, []string{job.ID}, jobs.WaitOptions{
			Timeout:  window,
			Input:    true,
			Progress: s.progress(ctx, req, window),
		})
		if ctx.Err() != nil {
			// The client cancelled the call: it will never read the
			// sessionId of a job it asked to run in the foreground, so
			// the job goes, as a command does on ^C, and the log says so.
			// Whatever the wait answered: a wait cut short by its
			// context may answer as a timeout rather than an error.
			return nil, nil, s.cancelled(ctx, req, job)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("wait for session %s (it was started and may still run): %w", job.ID, err)
		}
		if len(wr.Jobs) > 0 {
			job = wr.Jobs[0]
		}
		reason = wr.Reason
	}

	r := executeResult{
		Status:          openclawStatus(job.Status),
		SessionID:       job.ID,
		Name:            job.Name,
		ExitCode:        job.ExitCode,
		Signal:          job.Signal,
		Reason:          job.Reason,
		RuntimeMs:       job.Runtime.Milliseconds(),
		WaitingForInput: job.WaitingForInput || reason == jobs.WaitInput,
	}
	if job.Status == jobs.StatusQueued {
		r.Queued, r.Queue, r.QueuePosition = true, job.Queue, job.QueuePosition
		why := "it starts in its turn"
		if job.Queue == "" && len(spec.After) == 0 && len(spec.AfterOK) == 0 {
			why = "the scope is at its running cap; it starts when a running job ends"
		}
		notes = append(notes, fmt.Sprintf("queued (#%d%s): %s; follow with process action=wait sessionId=%s", job.QueuePosition, queueIn(job), why, job.ID))
	}
	switch {
	case job.Status == jobs.StatusQueued:
	case job.Status.Terminal():
		pr, err := s.tail(ctx, job.ID, resultChars)
		if err != nil {
			return nil, nil, err
		}
		out := pr.out
		r.Output, r.OutputInfo = &out.Text, &out
		if out.Note != "" {
			notes = append(notes, out.Note)
		}
	case window > 0:
		pr, err := s.readNew(ctx, job.ID, s.pollChars)
		if err != nil {
			return nil, nil, err
		}
		out := pr.out
		r.Output, r.OutputInfo = &out.Text, &out
		if reason == jobs.WaitInput {
			if !job.WaitingForInput { // else the summary says so
				notes = append(notes, "it waits for input on stdin (use process action=write)")
			}
		} else {
			notes = append(notes, fmt.Sprintf("still running after %s; follow with process action=wait sessionId=%s", round(window), job.ID))
		}
		if out.Note != "" {
			notes = append(notes, out.Note)
		}
	default:
		notes = append(notes, fmt.Sprintf("started; follow with process action=wait sessionId=%s", job.ID))
	}
	if job.OutputBytes > offloadAfter {
		var offNote string
		r.Offloaded, r.OutputFilePath, offNote = s.offloaded(ctx, job)
		switch {
		case r.Offloaded:
			notes = append(notes, "output offloaded to "+r.OutputFilePath)
		case offNote != "":
			notes = append(notes, offNote)
		}
	}
	r.Note = strings.Join(notes, "; ")
	line := summary(job)
	if r.Note != "" {
		line += ". " + r.Note
	}
	res, v, err := resultWith(line, r.OutputInfo, r)
	if res != nil && job.Status == jobs.StatusFailed && job.ExitCode == nil && job.Signal == "" {
		// The command never ran (bad cwd, missing shell …): that is the
		// tool failing, not the command.
		res.IsError = true
	}
	return res, v, err
}

// cancelled ends job, started by an execute_command call its client
// cancelled while waiting for it, and tells the client in a log message
// (at level notice, when its level takes it) what became of the job.
func (s *server) cancelled(ctx context.Context, req *sdk.CallToolRequest, job jobs.Job) error {
	bg, stop := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stop()
	msg := fmt.Sprintf("execute_command cancelled: session %s (%s) was killed", job.ID, cutEnd(job.Command, maxCommandChars))
	res, err := s.c.Kill(bg, job.ID, 0)
	switch {
	case err != nil:
		msg = fmt.Sprintf("execute_command cancelled: session %s (%s) may still run: kill failed: %v", job.ID, cutEnd(job.Command, maxCommandChars), err)
	case res.AlreadyDone && res.Status == jobs.StatusKilled:
		// Start killed it already, or a kill came first.
	case res.AlreadyDone:
		msg = fmt.Sprintf("execute_command cancelled: session %s (%s) had already ended (%s)", job.ID, cutEnd(job.Command, maxCommandChars), openclawStatus(res.Status))
	}
	if req != nil && req.Session != nil {
		//lint:ignore SA1019 a logging notification is how a server tells its client of what it did unasked
		_ = req.Session.Log(bg, &sdk.LoggingMessageParams{Level: "notice", Logger: "jobs", Data: msg})
	}
	return fmt.Errorf("%s: %w", msg, ctx.Err())
}

// specFor checks execute_command's arguments and turns them into a Spec.
func specFor(in executeInput) (jobs.Spec, error) {
	if strings.TrimSpace(in.Command) == "" {
		return jobs.Spec{}, argError("command is required and must not be empty")
	}
	spec := jobs.Spec{
		Command: in.Command,
		Shell:   strings.TrimSpace(in.Shell),
		Cwd:     in.Cwd,
		Label:   in.Label,
		Name:    in.Name,
		Replace: in.Replace,
		Tmux:    in.Tmux,
		Queue:   strings.TrimSpace(in.Queue),
		After:   in.After,
		AfterOK: in.AfterOK,
		PTY:     in.PTY,
		Merge:   in.Merge,
	}
	if spec.Label == "" {
		spec.Label = in.Description
	}
	names := make([]string, 0, len(in.Env))
	for k := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return jobs.Spec{}, argError("env: bad variable name \"%s\"", textclean.Echo(k))
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		spec.Env = append(spec.Env, k+"="+in.Env[k])
	}
	if in.Description != "" {
		if n := utf8.RuneCountInString(in.Description); n < minDescription || n > maxDescription {
			return jobs.Spec{}, argError("description must be %d to %d characters, got %d", minDescription, maxDescription, n)
		}
	}
	if in.Timeout != nil {
		// Milliseconds, as the documents' z.number().min(100) says (the
		// unit of yieldMs beside it); 0, which they refuse, means none.
		v := *in.Timeout
		switch {
		case v == 0:
			spec.Timeout = jobs.Unlimited // 0 means none here, the default in a Spec.
		case v < minTimeoutMs || v > maxSeconds*1000 || math.IsNaN(v):
			return jobs.Spec{}, argError("timeout is in milliseconds and must be at least %d (0 = none), at most %g, got %g", minTimeoutMs, float64(maxSeconds*1000), v)
		default:
			spec.Timeout = time.Duration(v * float64(time.Millisecond))
		}
	}
	return spec, nil
}

// readNew reads job id's output since the last read (poll's cursor): when
// more is new than chars characters, the newest part from a line start,
// saying what it skipped. The cursor moves past what it returns.
func (s *server) readNew(ctx context.Context, id string, chars int64) (pollResultOf, error) {
	return s.readNewWith(ctx, id, jobs.PollOptions{Tail: chars, Newest: true})
}

func (s *server) readNewWith(ctx context.Context, id string, o jobs.PollOptions) (pollResultOf, error) {
	pr, err := s.c.ReadNew(ctx, id, o)
	if err != nil {
		return pollResultOf{}, describe(id, err)
	}
	out := viewOutput(pr.Output)
	var notes []string
	if pr.Output.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%s of older new output skipped to show the newest (read it with action=log unit=bytes offset=%d)", size(pr.Output.Skipped), pr.Output.SkippedFrom))
	}
	if out.OmittedAfter > 0 {
		notes = append(notes, fmt.Sprintf("%s more of new output after this; poll again to read on", size(out.OmittedAfter)))
	}
	out.Note = strings.Join(notes, "; ")
	return pollResultOf{pr.Job, out}, nil
}

// tail reads the last chars characters of job id's output, without moving
// poll's cursor.
func (s *server) tail(ctx context.Context, id string, chars int64) (pollResultOf, error) {
	pr, err := s.c.Poll(ctx, id, jobs.PollOptions{Tail: chars})
	if err != nil {
		return pollResultOf{}, describe(id, err)
	}
	out := viewOutput(pr.Output) // starts at a line when earlier output is left out
	out.Note = tailNote(id, out)
	return pollResultOf{pr.Job, out}, nil
}

// pollResultOf is a job and a piece of its output.
type pollResultOf struct {
	job jobs.Job
	out outputView
}

// progress returns a WaitOptions.Progress that sends MCP progress
// notifications, or nil when the client did not ask for them.
func (s *server) progress(ctx context.Context, req *sdk.CallToolRequest, total time.Duration) func([]jobs.Job) {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	start := time.Now()
	return func(js []jobs.Job) {
		msg := "waiting"
		if len(js) > 0 {
			msg = summary(js[0])
		}
		// A failed notification (client gone) is not the wait's business.
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: tok,
			Progress:      time.Since(start).Seconds(),
			Total:         total.Seconds(),
			Message:       msg,
		})
	}
}
