package mcp

// The macos-shell profile: the macOS Shell MCP's run_background, list_processes,
// get_process_output, kill_process and stream_process_output. The original's
// sessions are named groups inside this server's scope (kept as the job's
// label), never another scope. Its 300-line ring buffer is not copied:
// jobs keeps the whole output, and run_background says so.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	macDefaultSession = "default"
	macDefaultLines   = 100
	macRecentLines    = 10
	// macStreamWait is how long stream_process_output waits for new lines
	// when not told (seconds), within the call bound.
	macStreamWait = 10 * time.Second
	// macStreamTick is how often it looks.
	macStreamTick = 100 * time.Millisecond
)

func macInstructions(scope string) string {
	return "jobs runs shell commands as durable background processes (scope " + strconv.Quote(scope) + "). " +
		"run_background starts one and returns its processId; list_processes, get_process_output (line objects), stream_process_output (waits for new lines) and kill_process follow and end it. " +
		"Sessions group processes inside this scope. Output is kept whole, not in a 300-line ring."
}

type macRunInput struct {
	Command    string            `json:"command" jsonschema:"Command to execute"`
	Args       []string          `json:"args,omitempty" jsonschema:"Command arguments"`
	Session    string            `json:"session,omitempty" jsonschema:"Session name (default: default)"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"Working directory override"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"Environment variables"`
	BufferSize *count            `json:"bufferSize,omitempty" jsonschema:"Accepted for compatibility: all output is kept, not only the last bufferSize lines"`
}

type macListInput struct {
	Session       string `json:"session,omitempty" jsonschema:"Filter by session"`
	Status        string `json:"status,omitempty" jsonschema:"Filter by status: starting, running, stopped, failed, killed"`
	IncludeOutput bool   `json:"includeOutput,omitempty" jsonschema:"Include the last 10 lines of output"`
}

type macOutputInput struct {
	ProcessID string `json:"processId" jsonschema:"Background process ID"`
	Lines     *count `json:"lines,omitempty" jsonschema:"Number of lines to retrieve (default 100)"`
	FromLine  *count `json:"fromLine,omitempty" jsonschema:"Start from this line number (from 1)"`
	Type      string `json:"type,omitempty" jsonschema:"all (default), stdout or stderr"`
}

type macKillInput struct {
	ProcessID string `json:"processId" jsonschema:"Background process ID"`
	Signal    string `json:"signal,omitempty" jsonschema:"Signal to send (default SIGTERM, which ends the whole process tree)"`
	Force     bool   `json:"force,omitempty" jsonschema:"Use SIGKILL"`
}

type macStreamInput struct {
	ProcessID string   `json:"processId" jsonschema:"Background process ID"`
	AfterLine *count   `json:"afterLine,omitempty" jsonschema:"Return lines after this line number (default: the lines already shown are skipped: 0 shows all)"`
	Timeout   *float64 `json:"timeout,omitempty" jsonschema:"Seconds to wait for new lines (default 10, at most the call bound)"`
}

type macLine struct {
	Timestamp  string `json:"timestamp"`
	Type       string `json:"type"`
	Content    string `json:"content"`
	LineNumber int64  `json:"lineNumber"`
}

type macProc struct {
	ID           string    `json:"id"`
	SessionName  string    `json:"sessionName"`
	Command      string    `json:"command"`
	Args         []string  `json:"args"`
	PID          *int      `json:"pid"`
	Status       string    `json:"status"`
	StartTime    string    `json:"startTime"`
	Runtime      int64     `json:"runtime"`
	OutputLines  int64     `json:"outputLines"`
	ExitCode     *int      `json:"exitCode,omitempty"`
	RecentOutput *[]string `json:"recentOutput,omitempty"`
}

type macOutput struct {
	ProcessID      string    `json:"processId"`
	Status         string    `json:"status"`
	TotalLines     int64     `json:"totalLines"`
	RequestedLines int64     `json:"requestedLines"`
	Output         []macLine `json:"output"`
	NextLine       int64     `json:"nextLine,omitempty"`
}

// macStatus is a job's status in the macOS Shell MCP's words: a process that exited
// 0 is stopped; one ended by a signal, kill or timeout is killed.
func macStatus(st jobs.Status) string {
	switch st {
	case jobs.StatusStarting:
		return "starting"
	case jobs.StatusRunning:
		return "running"
	case jobs.StatusDone:
		return "stopped"
	case jobs.StatusKilled, jobs.StatusTimedOut:
		return "killed"
	}
	return "failed"
}

func addMacShell(s *server, srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "run_background", Description: "Start a command in the background and return immediately with its processId.",
		InputSchema: schemaOf[macRunInput]("run_background"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}}, s.macRun)
	ls := schemaOf[macListInput]("list_processes")
	ls.Properties["status"].Enum = []any{"starting", "running", "stopped", "failed", "killed"}
	sdk.AddTool(srv, &sdk.Tool{Name: "list_processes", Description: "List background processes, optionally filtered by session or status.",
		InputSchema: ls, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.macList)
	outs := schemaOf[macOutputInput]("get_process_output")
	outs.Properties["type"].Enum = []any{"all", "stdout", "stderr"}
	sdk.AddTool(srv, &sdk.Tool{Name: "get_process_output", Description: "Retrieve a background process's output as lines (timestamp, type, content, lineNumber): the last lines (default 100), or lines from fromLine.",
		InputSchema: outs, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.macOutput)
	sdk.AddTool(srv, &sdk.Tool{Name: "stream_process_output", Description: "Wait for new output lines of a background process (up to timeout seconds) and return them with nextLine, the afterLine of the next call.",
		InputSchema: schemaOf[macStreamInput]("stream_process_output"), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.macStream)
	sdk.AddTool(srv, &sdk.Tool{Name: "kill_process", Description: "Send a signal to a background process (default SIGTERM: the whole process tree, then SIGKILL after 2 s; force=true: SIGKILL).",
		InputSchema: schemaOf[macKillInput]("kill_process"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}}, s.macKill)
}

func (s *server) macRun(ctx context.Context, req *sdk.CallToolRequest, in macRunInput) (*sdk.CallToolResult, any, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, argError("command is required and must not be empty")
	}
	line := in.Command
	for _, a := range in.Args {
		line += " " + textclean.ShellQuote(a)
	}
	session := in.Session
	if session == "" {
		session = macDefaultSession
	}
	spec, err := specFor(executeInput{Command: line, Cwd: in.Cwd, Env: in.Env})
	if err != nil {
		return nil, nil, err
	}
	spec.Label = session
	job, err := s.c.Start(ctx, spec)
	if err != nil {
		return nil, nil, describe("", err)
	}
	res := map[string]any{"processId": job.ID, "pid": job.PID, "status": macStatus(job.Status), "sessionName": session}
	if in.BufferSize != nil {
		res["bufferSize"] = "all output is kept (" + strconv.FormatInt(int64(*in.BufferSize), 10) + " lines asked); get_process_output reads any part of it"
	}
	return jsonResult(res)
}

func macView(j jobs.Job) macProc {
	p := macProc{ID: j.ID, SessionName: j.Label, Command: j.Command, Args: []string{}, Status: macStatus(j.Status),
		StartTime: stamp(&j.CreatedAt), Runtime: j.Runtime.Milliseconds(), OutputLines: j.OutputLines, ExitCode: j.ExitCode}
	if j.StartedAt != nil {
		p.StartTime = stamp(j.StartedAt)
	}
	if j.PID > 0 {
		p.PID = &j.PID
	}
	if p.SessionName == "" {
		p.SessionName = macDefaultSession
	}
	return p
}

func (s *server) macList(ctx context.Context, req *sdk.CallToolRequest, in macListInput) (*sdk.CallToolResult, any, error) {
	list, err := s.c.List(ctx, jobs.Filter{Limit: maxListJobs})
	if err != nil {
		return nil, nil, describe("", err)
	}
	out := struct {
		Processes []macProc `json:"processes"`
	}{Processes: []macProc{}}
	for _, j := range list {
		p := macView(j)
		if in.Session != "" && p.SessionName != in.Session || in.Status != "" && p.Status != in.Status {
			continue
		}
		if in.IncludeOutput {
			o, err := s.c.Log(ctx, j.ID, jobs.Range{TailLines: macRecentLines, Clean: true})
			if err != nil {
				return nil, nil, describe(j.ID, err)
			}
			recent := append([]string{}, nonEmptyLines(o.Text)...)
			p.RecentOutput = &recent
		}
		out.Processes = append(out.Processes, p)
	}
	return jsonResult(out)
}

// macLines reads lines of job id: from line from (1-based; 0 means the
// last n) for n lines, of one stream or all.
func (s *server) macLines(ctx context.Context, id string, from, n int64, typ string) (jobs.Job, jobs.Output, []macLine, error) {
	r := jobs.Range{TailLines: n, Clean: true}
	if from > 0 {
		r = jobs.Range{FromLine: from, Lines: n, Clean: true}
	}
	switch typ {
	case "", "all":
	case "stdout", "stderr":
		r.Stream = jobs.Stream(typ)
	default:
		return jobs.Job{}, jobs.Output{}, nil, argError("type must be all, stdout or stderr, got %q", textclean.Echo(typ))
	}
	j, err := s.c.Get(ctx, id)
	if err != nil {
		return j, jobs.Output{}, nil, macError(id, err)
	}
	o, err := s.c.Log(ctx, j.ID, r)
	if err != nil {
		return j, o, nil, macError(id, err)
	}
	var lines []macLine
	text := strings.TrimSuffix(o.Text, "\n")
	if text == "" {
		return j, o, []macLine{}, nil
	}
	split := strings.Split(text, "\n")
	// Each line's type and timestamp: the stream that wrote its end and
	// the time of the stored chunk holding that end (jobs stores output in
	// chunks of up to about 1 KiB, each stamped with its latest write).
	marks, err := s.c.LineMarks(ctx, j.ID, o.FirstLine, int64(len(split)), r.Stream)
	if err != nil {
		return j, o, nil, macError(id, err)
	}
	fallback := stamp(j.LastOutputAt)
	if fallback == "" {
		fallback = stamp(&j.CreatedAt)
	}
	for i, l := range split {
		t, at := typ, fallback
		if t == "" || t == "all" {
			t = "stdout"
		}
		if i < len(marks) {
			at = stamp(&marks[i].At)
			if marks[i].Stream == jobs.Stderr {
				t = "stderr"
			} else {
				t = "stdout"
			}
		}
		lines = append(lines, macLine{Timestamp: at, Type: t, Content: l, LineNumber: o.FirstLine + int64(i)})
	}
	return j, o, lines, nil
}

func macError(id string, err error) error {
	return procError(id, err)
}

func (s *server) macOutput(ctx context.Context, req *sdk.CallToolRequest, in macOutputInput) (*sdk.CallToolResult, any, error) {
	if in.ProcessID == "" {
		return nil, nil, argError("processId is required")
	}
	n := int64(macDefaultLines)
	if in.Lines != nil {
		if *in.Lines < 1 {
			return nil, nil, argError("lines must be at least 1, got %d", *in.Lines)
		}
		n = min(int64(*in.Lines), maxLogLines)
	}
	var from int64
	if in.FromLine != nil {
		if *in.FromLine < 1 {
			return nil, nil, argError("fromLine must be at least 1, got %d", *in.FromLine)
		}
		from = int64(*in.FromLine)
	}
	j, o, lines, err := s.macLines(ctx, in.ProcessID, from, n, in.Type)
	if err != nil {
		return nil, nil, err
	}
	return jsonResult(macOutput{ProcessID: j.ID, Status: macStatus(j.Status), TotalLines: o.TotalLines, RequestedLines: n, Output: lines})
}

func (s *server) macStream(ctx context.Context, req *sdk.CallToolRequest, in macStreamInput) (*sdk.CallToolResult, any, error) {
	if in.ProcessID == "" {
		return nil, nil, argError("processId is required")
	}
	wait := macStreamWait
	if in.Timeout != nil {
		d, err := seconds("timeout", *in.Timeout)
		if err != nil {
			return nil, nil, err
		}
		wait = d
	}
	wait = min(wait, s.bound)
	var after int64
	if in.AfterLine != nil {
		after = max(int64(*in.AfterLine), 0)
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(macStreamTick)
	defer tick.Stop()
	for {
		j, err := s.c.Get(ctx, in.ProcessID)
		if err != nil {
			return nil, nil, macError(in.ProcessID, err)
		}
		// A line is complete at its newline; a finished job's last
		// unfinished line counts too.
		done := j.Status.Terminal()
		if j.OutputLines > after || done || !time.Now().Before(deadline) {
			_, o, lines, err := s.macLines(ctx, j.ID, after+1, maxLogLines, "all")
			if err != nil {
				return nil, nil, err
			}
			if !done && o.Text != "" && !strings.HasSuffix(o.Text, "\n") && len(lines) > 0 {
				lines = lines[:len(lines)-1] // the unfinished line comes next time
			}
			next := after
			if len(lines) > 0 {
				next = lines[len(lines)-1].LineNumber
			}
			return jsonResult(macOutput{ProcessID: j.ID, Status: macStatus(j.Status), TotalLines: o.TotalLines, RequestedLines: int64(len(lines)), Output: lines, NextLine: next})
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *server) macKill(ctx context.Context, req *sdk.CallToolRequest, in macKillInput) (*sdk.CallToolResult, any, error) {
	if in.ProcessID == "" {
		return nil, nil, argError("processId is required")
	}
	j, err := s.c.Get(ctx, in.ProcessID)
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	prev := macStatus(j.Status)
	sig := in.Signal
	if in.Force {
		sig = "KILL"
	}
	// The engine's one decision (jobs.Client.KillSignal): SIGTERM (the
	// default) and SIGKILL, by name or number, end the whole tree and
	// record it killed; any other signal is sent once. A finished job's
	// leftovers are ended too.
	k, err := s.c.KillSignal(ctx, j.ID, sig, 0)
	if errors.Is(err, jobs.ErrNotRunning) && j.Status.Terminal() {
		// A signal that does not end a job, to one that has ended.
		k, err = jobs.KillResult{JobID: j.ID, Status: j.Status, AlreadyDone: true, Signalled: []int{}, Survivors: []int{}}, nil
	}
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	killed := !k.AlreadyDone || len(k.Signalled) > 0
	if j, err = s.c.Get(ctx, j.ID); err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	out := map[string]any{"processId": j.ID, "previousStatus": prev, "newStatus": macStatus(j.Status), "killed": killed,
		"signalled": k.Signalled, "survivors": k.Survivors, "escalated": k.Escalated, "alreadyDone": k.AlreadyDone}
	if k.Signal != "" {
		out["signal"] = k.Signal
	}
	if k.Unreached != "" {
		out["unreached"] = k.Unreached
	}
	return jsonResult(out)
}
