package mcp

// The duragent profile: Duragent's spawn_process and process, by handle.
// The original's registry (in memory, backed by .meta.json files) is the jobs
// database here. Its statuses are running, completed, failed, lost and
// timed_out (and spawned, in the meta files): a job that a kill ended
// (jobs' killed) reads failed, with killed: true beside it.
// docs/profiles/duragent.md holds the document's requirements row by row.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// duragentTimeout is the original's default maximum runtime.
	duragentTimeout = 30 * time.Minute
	// duragentKillGrace is the original's SIGTERM-to-SIGKILL delay.
	duragentKillGrace = 5 * time.Second
	// duragentTailChars is the tail a completion message and a waited
	// result carry (the original's "last 2000 chars").
	duragentTailChars = 2000
	// duragentTmuxPrefix starts the original's tmux session names,
	// duragent-<handle>.
	duragentTmuxPrefix = "duragent-"
)

func duragentInstructions(scope string) string {
	return "jobs runs shell commands as durable background jobs (scope " + strconv.Quote(scope) + "). " +
		"spawn_process starts a command and returns its handle (wait=true blocks for the result, up to the call bound); " +
		"process lists, checks status, reads the log (offset/limit in lines), captures and types into tmux processes, writes to stdin and kills, by handle. " +
		"Statuses: running, completed, failed (a killed process too, with killed: true), lost, timed_out. " +
		"A completion message (a logging notification) tells of each process spawned with wait=false when it ends. " +
		"Each process's output and metadata are mirrored to .duragent/processes/<handle>.log and .meta.json. " +
		"Processes and their full output survive a restart of this server."
}

type spawnInput struct {
	Command        string   `json:"command" jsonschema:"the shell command line"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"working directory (default: the server's)"`
	Wait           bool     `json:"wait,omitempty" jsonschema:"block until the process ends and return its result (up to the call bound)"`
	Tmux           bool     `json:"tmux,omitempty" jsonschema:"run inside a tmux session (capture, send_keys, tmux attach)"`
	PTY            bool     `json:"pty,omitempty" jsonschema:"run in a terminal: output not held back by buffering"`
	Label          string   `json:"label,omitempty" jsonschema:"a label for people"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"maximum runtime in seconds (default 1800); then SIGTERM, 5 s, SIGKILL"`
}

type duragentProcessInput struct {
	Action     string          `json:"action" jsonschema:"list, status, log, capture, send_keys, write or kill"`
	Handle     string          `json:"handle,omitempty" jsonschema:"the process handle (every action but list)"`
	Offset     *count          `json:"offset,omitempty" jsonschema:"log: first line to read, from 0 (default: the last lines)"`
	Limit      *count          `json:"limit,omitempty" jsonschema:"log: how many lines (default 200)"`
	Keys       json.RawMessage `json:"keys,omitempty" jsonschema:"send_keys: text to type (a string), or a list of tmux keys (key names are pressed)"`
	PressEnter *bool           `json:"press_enter,omitempty" jsonschema:"send_keys: press Enter after a string of keys (default true)"`
	Data       *string         `json:"data,omitempty" jsonschema:"write: text to send to stdin"`
	EOF        bool            `json:"eof,omitempty" jsonschema:"write: close stdin afterwards"`
}

// duragentProc is a process as the original's tools show it. Handle,
// status, pid, tmux_session, exit_code, output and duration_seconds are
// the document's; the rest are additions.
type duragentProc struct {
	Handle      string `json:"handle"`
	Label       string `json:"label,omitempty"`
	Command     string `json:"command"`
	Status      string `json:"status"`
	Killed      bool   `json:"killed,omitempty"`
	PID         int    `json:"pid,omitempty"`
	TmuxSession string `json:"tmux_session,omitempty"`
	// AttachCommand is what a person types to watch a tmux process
	// (tmux attach -t <session>, with the tmux server it runs on).
	AttachCommand string `json:"attach_command,omitempty"`
	// TmuxUnavailable says that tmux=true was asked where tmux is not
	// installed: the process runs as a plain process instead.
	TmuxUnavailable bool `json:"tmux_unavailable,omitempty"`
	ExitCode        *int `json:"exit_code,omitempty"`
	// DurationSeconds is whole seconds, as the document's example (142);
	// DurationMS the same to the millisecond.
	DurationSeconds *int64  `json:"duration_seconds,omitempty"`
	DurationMS      *int64  `json:"duration_ms,omitempty"`
	Output          *string `json:"output,omitempty"`
	// OutputTruncated says that output is the last 2000 characters of a
	// longer output (read the rest with process action=log).
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	LogFile         string `json:"log_file,omitempty"`
	MetaFile        string `json:"meta_file,omitempty"`
}

// duragentStatus is a job's status in Duragent's words: running,
// completed, failed, lost or timed_out. A job a kill ended is failed (the
// document has no word for it); viewProc adds killed: true.
func duragentStatus(st jobs.Status) string {
	switch st {
	case jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning:
		return "running"
	case jobs.StatusDone:
		return "completed"
	case jobs.StatusKilled:
		return "failed"
	}
	return string(st) // failed, timed_out, lost
}

func (s *server) viewProc(j jobs.Job) duragentProc {
	p := duragentProc{Handle: j.ID, Label: j.Label, Command: j.Command, Status: duragentStatus(j.Status), Killed: j.Status == jobs.StatusKilled,
		PID: j.PID, TmuxSession: j.TmuxSession, ExitCode: j.ExitCode}
	if j.Status.Terminal() {
		secs, ms := int64(j.Runtime/time.Second), j.Runtime.Milliseconds()
		p.DurationSeconds, p.DurationMS = &secs, &ms
	}
	if s.files != nil && s.files.mirrored(j.ID) {
		p.LogFile, p.MetaFile = s.files.paths(j.ID)
	}
	return p
}

func addDuragent(s *server, srv *sdk.Server) {
	if s.files = newDuragentFiles(s.c); s.files != nil {
		s.work = append(s.work, s.files.run)
	}
	sdk.AddTool(srv, &sdk.Tool{
		Name: "spawn_process",
		Description: "Start a background command and return its handle at once (wait=false), or block until it ends and return status, exit_code, output (the last 2000 characters) and duration_seconds (wait=true; up to " + round(s.bound) + " per call, then the handle of the still running process). " +
			"tmux=true runs it in tmux session duragent-<handle>, which a person can attach to; where tmux is not installed it runs as a plain process (tmux_unavailable: true). " +
			"timeout_seconds (default 1800): then SIGTERM, 5 s, SIGKILL, status timed_out. " +
			"When a process started with wait=false ends (or a wait=true one that outlived the call), a completion message is sent as a logging notification. " +
			"Output and metadata are mirrored to .duragent/processes/<handle>.log and .meta.json (log_file, meta_file).",
		InputSchema: schemaOf[spawnInput]("spawn_process"),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.spawnProcess)
	ps := schemaOf[duragentProcessInput]("process")
	ps.Properties["action"].Enum = []any{"list", "status", "log", "capture", "send_keys", "write", "kill"}
	ps.Properties["keys"].Type = ""
	ps.Properties["keys"].Types = []string{"string", "array"}
	ps.Properties["keys"].Items = nil
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "process",
		Description: "Interact with spawned processes by handle: list, status, log (offset/limit in lines), capture (tmux screen), send_keys (tmux), write (stdin), kill (SIGTERM, 5 s, SIGKILL).",
		InputSchema: ps,
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.duragentProcess)
}

func (s *server) spawnProcess(ctx context.Context, req *sdk.CallToolRequest, in spawnInput) (*sdk.CallToolResult, any, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, argError("command is required and must not be empty")
	}
	spec := jobs.Spec{Command: in.Command, Cwd: in.Workdir, Label: in.Label, Tmux: in.Tmux, PTY: in.PTY, TmuxPrefix: duragentTmuxPrefix,
		Timeout: duragentTimeout, TimeoutGrace: duragentKillGrace, TTL: s.ttl}
	if in.TimeoutSeconds != nil {
		d, err := seconds("timeout_seconds", *in.TimeoutSeconds)
		if err != nil {
			return nil, nil, err
		}
		spec.Timeout = d
		if d == 0 {
			spec.Timeout = jobs.Unlimited
		}
	}
	// A completion notice fires only for wait=false: a wait=true spawn
	// is marked before its end can be announced (see notifier.holdInline).
	release := func() {}
	if in.Wait && s.notices != nil {
		release = s.notices.holdInline()
	}
	job, err := s.c.Start(ctx, spec)
	fellBack := false
	if spec.Tmux && errors.Is(err, jobs.ErrNoTmux) {
		// "tmux available + tmux:true? No: a plain process" (the
		// document's lifecycle). ErrNoTmux creates no job.
		spec.Tmux, fellBack = false, true
		job, err = s.c.Start(ctx, spec)
	}
	if err == nil && in.Wait && s.notices != nil {
		s.notices.inline(ctx, job.ID)
	}
	release()
	if err != nil {
		return nil, nil, procError("", err)
	}
	if s.files != nil {
		s.files.add(ctx, job.ID)
	}
	if !in.Wait {
		p := duragentProc{Handle: job.ID, TmuxSession: job.TmuxSession, Status: duragentStatus(job.Status), PID: job.PID, Command: job.Command, Label: job.Label, TmuxUnavailable: fellBack}
		if s.files != nil && s.files.mirrored(job.ID) {
			p.LogFile, p.MetaFile = s.files.paths(job.ID)
		}
		if job.TmuxSession != "" {
			if argv, err := s.c.AttachCommand(ctx, job.ID); err == nil {
				p.AttachCommand = textclean.ShellJoin(argv)
			}
		}
		return jsonResult(p)
	}
	if !job.Status.Terminal() {
		wr, err := s.c.Wait(ctx, []string{job.ID}, jobs.WaitOptions{Timeout: s.bound, Progress: s.progress(ctx, req, s.bound)})
		if err != nil {
			return nil, nil, fmt.Errorf("wait for process %s (it was started and may still run): %w", job.ID, err)
		}
		job = wr.Jobs[0]
	}
	if !job.Status.Terminal() && s.notices != nil {
		// The result cannot be returned inline: the process goes on in
		// the background, and its end is announced like a wait=false
		// one's. One that ended meanwhile is returned inline after all,
		// so that no end goes untold.
		s.notices.wanted(ctx, job.ID)
		if j, err := s.c.Get(ctx, job.ID); err == nil {
			job = j
		}
	}
	p := s.viewProc(job)
	p.TmuxUnavailable = fellBack
	if !job.Status.Terminal() {
		r, sc, err := jsonResult(p)
		if r != nil {
			r.Content = append(r.Content, &sdk.TextContent{Text: "Still running after " + round(s.bound) + " (the call bound); it goes on, and a completion message is sent when it ends. Follow it with process action=status or action=log handle=" + job.ID + "."})
		}
		return r, sc, err
	}
	if s.files != nil {
		s.files.sync(ctx, job.ID)
	}
	out, cut, err := lastChars(ctx, s.c, job.ID, duragentTailChars)
	if err != nil {
		return nil, nil, procError(job.ID, err)
	}
	p.Output, p.OutputTruncated = &out, cut
	return jsonResult(p)
}

// duragentTail is the output a completion message of this profile ends
// with: the last 2000 characters.
func duragentTail(ctx context.Context, c *jobs.Client, id string) (string, error) {
	text, _, err := lastChars(ctx, c, id, duragentTailChars)
	return text, err
}

// lastChars is the last n characters of job id's cleaned output, cut
// wherever the n-th character from the end falls, as the original's
// "last 2000 chars" (a tail cut at a line start would drop a long last
// line). cut reports that output came before them.
func lastChars(ctx context.Context, c *jobs.Client, id string, n int) (text string, cut bool, err error) {
	j, err := c.Get(ctx, id)
	if err != nil {
		return "", false, err
	}
	end := j.OutputBytes
	if end == 0 {
		return "", false, nil
	}
	// Cleaning drops escape sequences and overwritten text, so n
	// characters may take many more bytes: widen the window until it
	// holds n characters or the whole output.
	for window := int64(16 * n); ; window *= 8 {
		start := max(end-window, 0)
		o, err := c.Log(ctx, id, jobs.Range{Offset: start, Limit: end - start, ByteRange: true, Clean: true})
		if err != nil {
			return "", false, err
		}
		runes := []rune(o.Text)
		if len(runes) > n {
			return string(runes[len(runes)-n:]), true, nil
		}
		if start == 0 || window >= jobs.MaxPageBytes {
			return o.Text, start > 0, nil
		}
	}
}

// procError is a tool error about the handle, in the original's words,
// naming this profile's tools and actions only.
func procError(handle string, err error) error {
	h := textclean.Echo(handle)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process %s not found", h)
	case errors.Is(err, jobs.ErrNotRunning):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process %s is not running", h)
	case errors.Is(err, jobs.ErrNotTmux):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process %s is not running in tmux: capture and send_keys need a process spawned with spawn_process tmux=true (use process action=write for stdin, action=log for output)", h)
	case errors.Is(err, jobs.ErrNoTmux):
		return errors.New("tmux is not installed: capture and send_keys need tmux (use process action=write for stdin, action=log for output)")
	case errors.Is(err, jobs.ErrStdinClosed):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process %s stdin is not available", h)
	case errors.Is(err, jobs.ErrNotReading):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process %s is not reading its stdin: %s; see its output with process action=log, or close its stdin with eof=true", h, notReadingDetail(err))
	}
	return describe(handle, err)
}

func (s *server) duragentProcess(ctx context.Context, req *sdk.CallToolRequest, in duragentProcessInput) (*sdk.CallToolResult, any, error) {
	if in.Action == "list" {
		list, err := s.c.List(ctx, jobs.Filter{Limit: maxListJobs})
		if err != nil {
			return nil, nil, describe("", err)
		}
		out := struct {
			Processes []duragentProc `json:"processes"`
		}{Processes: []duragentProc{}}
		for _, j := range list {
			out.Processes = append(out.Processes, s.viewProc(j))
		}
		return jsonResult(out)
	}
	if in.Handle == "" {
		return nil, nil, argError("handle is required for action=%s", in.Action)
	}
	switch in.Action {
	case "status":
		j, err := s.c.Get(ctx, in.Handle)
		if err != nil {
			return nil, nil, procError(in.Handle, err)
		}
		return jsonResult(s.viewProc(j))
	case "log":
		r := jobs.Range{TailLines: defaultLogLines, Clean: true}
		if in.Offset != nil || in.Limit != nil {
			r = jobs.Range{FromLine: 1, Lines: defaultLogLines, Clean: true}
			if in.Offset != nil {
				if *in.Offset < 0 {
					return nil, nil, argError("offset must not be negative, got %d", *in.Offset)
				}
				r.FromLine = int64(*in.Offset) + 1
			}
			if in.Limit != nil {
				if *in.Limit < 1 {
					return nil, nil, argError("limit must be at least 1, got %d", *in.Limit)
				}
				r.Lines = min(int64(*in.Limit), maxLogLines)
			}
		}
		o, err := s.c.Log(ctx, in.Handle, r)
		if err != nil {
			return nil, nil, procError(in.Handle, err)
		}
		first := max(o.FirstLine-jobs.FirstLine, 0)
		return jsonResult(struct {
			Handle     string `json:"handle"`
			Output     string `json:"output"`
			Offset     int64  `json:"offset"`
			NextOffset int64  `json:"next_offset"`
			TotalLines int64  `json:"total_lines"`
		}{o.JobID, o.Text, first, first + o.Lines, o.TotalLines})
	case "capture":
		text, err := s.c.Capture(ctx, in.Handle, 0)
		if err != nil {
			return nil, nil, procError(in.Handle, err)
		}
		return jsonResult(map[string]string{"handle": in.Handle, "content": text})
	case "send_keys":
		keys, literal, err := duragentKeys(in)
		if err != nil {
			return nil, nil, err
		}
		if literal {
			if err := s.c.SendKeys(ctx, in.Handle, keys[:1], true); err != nil {
				return nil, nil, procError(in.Handle, err)
			}
			keys = keys[1:]
		}
		if len(keys) > 0 {
			if err := s.c.SendKeys(ctx, in.Handle, keys, false); err != nil {
				return nil, nil, procError(in.Handle, err)
			}
		}
		return jsonResult(map[string]any{"handle": in.Handle, "sent": true})
	case "write":
		if in.Data == nil && !in.EOF {
			return nil, nil, argError("write needs data (or eof=true)")
		}
		n := 0
		if in.Data != nil && *in.Data != "" {
			var err error
			if n, err = s.c.Write(ctx, in.Handle, []byte(*in.Data)); err != nil {
				return nil, nil, procError(in.Handle, err)
			}
		}
		if in.EOF {
			if err := s.c.CloseStdin(ctx, in.Handle); err != nil {
				return nil, nil, procError(in.Handle, err)
			}
		}
		return jsonResult(map[string]any{"handle": in.Handle, "written": n, "eof": in.EOF})
	case "kill":
		k, err := s.c.Kill(ctx, in.Handle, duragentKillGrace)
		if err != nil {
			return nil, nil, procError(in.Handle, err)
		}
		if s.files != nil {
			s.files.sync(ctx, k.JobID)
		}
		return jsonResult(map[string]any{"handle": k.JobID, "status": duragentStatus(k.Status), "killed": k.Status == jobs.StatusKilled})
	}
	return nil, nil, argError("unknown action %q: one of list, status, log, capture, send_keys, write, kill", textclean.Echo(in.Action))
}

// duragentKeys reads send_keys' keys: a string is typed as text and
// followed by Enter unless press_enter=false (the original's `tmux send-keys
// "<keys>" Enter`); a list is tmux keys, names pressed. literal reports
// that keys[0] is text to type.
func duragentKeys(in duragentProcessInput) (keys []string, literal bool, err error) {
	if len(in.Keys) == 0 {
		return nil, false, argError("send_keys needs keys")
	}
	var text string
	if json.Unmarshal(in.Keys, &text) == nil {
		keys = []string{text}
		if in.PressEnter == nil || *in.PressEnter {
			keys = append(keys, "Enter")
		}
		return keys, true, nil
	}
	if err := json.Unmarshal(in.Keys, &keys); err != nil {
		return nil, false, argError("keys must be a string or a list of strings")
	}
	return keys, false, nil
}
