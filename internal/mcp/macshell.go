package mcp

// The macos-shell profile: seed 003, the macOS Shell MCP server's
// background processes (run_background, list_processes,
// get_process_output, kill_process, stream_process_output), the server's
// run_command with runInBackground and its session tools
// (create_shell_session, list_shell_sessions, close_session), plus
// clear_process_output. The document is the specification; what this
// profile adds, and why no client of the document notices, is in
// docs/profiles/macos-shell.md.
//
// Sessions are named groups inside this server's scope, never another
// scope: a job's session is its label. The document's 300-line ring is a
// window over the job's stored output (get_process_output serves its last
// bufferSize lines), so the record stays whole for `jobs log` and audits.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	macDefaultSession = "default"
	macDefaultLines   = 100
	macRecentLines    = 10
	// macBufferSize is the document's default ring of output lines per
	// process ("AI-optimized"); macMaxBufferSize bounds what a call asks.
	macBufferSize    = 300
	macMaxBufferSize = 1_000_000
	// macPerSession and macTotal are the document's process limits: "Max
	// 50 background processes per session", "Max 200 total".
	macPerSession = 50
	macTotal      = 200
	// macTTL is how long a finished process is kept after it was last
	// looked at: "Automatic cleanup of stopped processes after 1 hour".
	macTTL = time.Hour
	// macCommandTimeout, macOutputLines and macErrorLines are run_command's
	// defaults (the server's: 30000 ms, 100 lines of stdout, 50 of stderr).
	macCommandTimeout = 30 * time.Second
	macOutputLines    = 100
	macErrorLines     = 50
	// macListMax bounds list_processes (newest first).
	macListMax = 500
	// macStreamWait is how long stream_process_output waits for new lines
	// when not told (seconds), within the call bound.
	macStreamWait = 10 * time.Second
	// macStreamLook is how often it looks while nothing is written: for
	// a process whose supervisor died without recording its end.
	macStreamLook = 5 * time.Second
	// macSignalSettle bounds how long kill_process waits for a STOP or
	// CONT it sent to show in the process's state.
	macSignalSettle = 2 * time.Second
	// macMetaNote starts the note that records, on a job's audit trail,
	// what run_background was given (command, args, bufferSize).
	macMetaNote = "macos-shell "
)

func macInstructions(scope string) string {
	return "jobs runs shell commands as durable background processes (scope " + strconv.Quote(scope) + "). " +
		"run_background (or run_command with runInBackground=true) starts one and returns its processId; list_processes (with CPU and memory), get_process_output (line objects), stream_process_output (waits for new lines), kill_process and clear_process_output follow and control it. " +
		"Sessions (create_shell_session, list_shell_sessions, close_session) give processes a working directory and environment and group them; closing a session with running processes asks first. " +
		"Each process keeps its last bufferSize lines (default 300) for get_process_output; processes survive a restart of this server."
}

// macShell is the profile's state: the server's, plus the sessions of
// this connection and what each job was started with.
type macShell struct {
	*server
	// shell runs commands: zsh, as the document spawns them, when it is
	// installed; else "" (the engine's bash, else sh).
	shell string
	// cwd is the default session's directory: the server's own.
	cwd string

	mu       sync.Mutex
	sessions map[string]*macSession
	meta     map[string]macMeta
}

// macSession is a named working directory and environment. Its values
// live in this server's memory only: jobs stores the names of a job's
// variables, never their values.
type macSession struct {
	Name     string
	Cwd      string
	Env      map[string]string
	Created  time.Time
	LastUsed time.Time
}

// macMeta is what run_background was given, kept on the job's audit trail
// (a note) so that a later server shows it as the document does.
type macMeta struct {
	Command    string   `json:"command"`
	Args       []string `json:"args"`
	BufferSize int64    `json:"bufferSize"`
}

type macRunInput struct {
	Command    string            `json:"command" jsonschema:"Command to execute (run by zsh when installed, else bash, else sh)"`
	Args       []string          `json:"args,omitempty" jsonschema:"Command arguments, appended to the command with spaces as the shell reads them"`
	Session    string            `json:"session,omitempty" jsonschema:"Session name/ID (default: default); an unknown name creates the session"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"Working directory override (default: the session's)"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"Environment variables, on top of the session's"`
	BufferSize *count            `json:"bufferSize,omitempty" jsonschema:"Max output lines to buffer (default: 300): get_process_output serves the last bufferSize lines"`
}

type macCommandInput struct {
	Command         string            `json:"command" jsonschema:"The shell command to execute"`
	Args            []string          `json:"args,omitempty" jsonschema:"Command arguments"`
	Session         string            `json:"session,omitempty" jsonschema:"Session name or ID (default: default)"`
	Cwd             string            `json:"cwd,omitempty" jsonschema:"Working directory (overrides the session's)"`
	Env             map[string]string `json:"env,omitempty" jsonschema:"Environment variables (merged with the session's)"`
	Timeout         *count            `json:"timeout,omitempty" jsonschema:"Command timeout in milliseconds (default 30000)"`
	MaxOutputLines  *count            `json:"maxOutputLines,omitempty" jsonschema:"Maximum lines of stdout to return (default 100)"`
	MaxErrorLines   *count            `json:"maxErrorLines,omitempty" jsonschema:"Maximum lines of stderr to return (default 50)"`
	RunInBackground bool              `json:"runInBackground,omitempty" jsonschema:"Start the command as a background process and return its processId at once, as run_background does (deprecated: use run_background)"`
	BufferSize      *count            `json:"bufferSize,omitempty" jsonschema:"With runInBackground: max output lines to buffer (default 300)"`
}

type macListInput struct {
	Session       string `json:"session,omitempty" jsonschema:"Filter by session"`
	Status        string `json:"status,omitempty" jsonschema:"Filter by status: starting, running, stopped, failed, killed"`
	IncludeOutput bool   `json:"includeOutput,omitempty" jsonschema:"Include the last 10 lines of output (recentOutput)"`
}

type macOutputInput struct {
	ProcessID string `json:"processId" jsonschema:"Background process ID"`
	Lines     *count `json:"lines,omitempty" jsonschema:"Number of lines to retrieve (default 100)"`
	FromLine  *count `json:"fromLine,omitempty" jsonschema:"Start from this line number (the lineNumber of the output objects; 0 or 1: the first line buffered)"`
	Type      string `json:"type,omitempty" jsonschema:"all (default), stdout or stderr"`
}

type macKillInput struct {
	ProcessID string `json:"processId" jsonschema:"Background process ID"`
	Signal    string `json:"signal,omitempty" jsonschema:"Signal to send (default SIGTERM, which ends the whole process tree; SIGSTOP pauses, SIGCONT continues)"`
	Force     bool   `json:"force,omitempty" jsonschema:"Use SIGKILL"`
}

type macStreamInput struct {
	ProcessID string   `json:"processId" jsonschema:"Background process ID"`
	AfterLine *count   `json:"afterLine,omitempty" jsonschema:"Return lines after this line number (default: the lines already shown are skipped: 0 shows all)"`
	Timeout   *float64 `json:"timeout,omitempty" jsonschema:"Seconds to wait for new lines (default 10, at most the call bound)"`
}

type macClearInput struct {
	ProcessID string `json:"processId" jsonschema:"Background process ID"`
}

type macLine struct {
	Timestamp  string `json:"timestamp"`
	Type       string `json:"type"`
	Content    string `json:"content"`
	LineNumber int64  `json:"lineNumber"`
}

type macProc struct {
	ID           string        `json:"id"`
	SessionName  string        `json:"sessionName"`
	Command      string        `json:"command"`
	Args         []string      `json:"args"`
	PID          *int          `json:"pid"`
	Status       string        `json:"status"`
	StartTime    string        `json:"startTime"`
	Runtime      int64         `json:"runtime"`
	OutputLines  int64         `json:"outputLines"`
	RecentOutput *[]string     `json:"recentOutput,omitempty"`
	ExitCode     *int          `json:"exitCode,omitempty"`
	EndTime      string        `json:"endTime,omitempty"`
	Paused       bool          `json:"paused,omitempty"`
	Shell        string        `json:"shell,omitempty"`
	BufferSize   int64         `json:"bufferSize"`
	BufferBytes  int64         `json:"bufferBytes"`
	Resources    *macResources `json:"resources,omitempty"`

	job jobs.Job
}

type macOutput struct {
	ProcessID      string        `json:"processId"`
	Status         string        `json:"status"`
	TotalLines     int64         `json:"totalLines"`
	RequestedLines int64         `json:"requestedLines"`
	Output         []macLine     `json:"output"`
	NextLine       int64         `json:"nextLine,omitempty"`
	BufferSize     int64         `json:"bufferSize,omitempty"`
	DroppedLines   int64         `json:"droppedLines,omitempty"`
	Paused         bool          `json:"paused,omitempty"`
	Resources      *macResources `json:"resources,omitempty"`
	Warnings       []string      `json:"warnings,omitempty"`
}

// macStatus is a job's status in the document's words: a process that
// exited 0 is stopped (the document sets STOPPED on exit code 0), one
// ended by a signal, kill or timeout is killed, any other end failed. A
// running process whose processes are stopped (SIGSTOP) is stopped too,
// with paused set and no exit code: the word the document has for a
// process that does not run, and the one kill_process's newStatus gives
// after a SIGSTOP. exitCode tells the two stopped apart.
func macStatus(j jobs.Job) string {
	switch j.Status {
	case jobs.StatusQueued, jobs.StatusStarting:
		return "starting"
	case jobs.StatusRunning:
		if j.Stopped {
			return "stopped"
		}
		return "running"
	case jobs.StatusDone:
		return "stopped"
	case jobs.StatusKilled, jobs.StatusTimedOut:
		return "killed"
	}
	return "failed"
}

// macPaused reports a running job stopped by a signal.
func macPaused(j jobs.Job) bool { return j.Status == jobs.StatusRunning && j.Stopped }

// macStatuses are the engine's statuses behind each of the document's.
var macStatuses = map[string][]jobs.Status{
	"starting": {jobs.StatusQueued, jobs.StatusStarting},
	"running":  {jobs.StatusRunning},
	"stopped":  {jobs.StatusDone, jobs.StatusRunning},
	"failed":   {jobs.StatusFailed, jobs.StatusLost},
	"killed":   {jobs.StatusKilled, jobs.StatusTimedOut},
}

func addMacShell(s *server, srv *sdk.Server) {
	m := &macShell{server: s, sessions: map[string]*macSession{}, meta: map[string]macMeta{}}
	if p, err := exec.LookPath("zsh"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			m.shell = abs
		}
	}
	m.cwd, _ = os.Getwd()
	m.sessions[macDefaultSession] = &macSession{Name: macDefaultSession, Cwd: m.cwd, Created: time.Now(), LastUsed: time.Now()}

	sdk.AddTool(srv, &sdk.Tool{Name: "run_background", Description: "Start a command in the background and return immediately with its processId, pid and status.",
		InputSchema: schemaOf[macRunInput]("run_background"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}}, m.run)
	sdk.AddTool(srv, &sdk.Tool{Name: "run_command", Description: "Run a shell command and return its stdout, stderr and exitCode (at most the call bound: a command still running then goes on in the background). runInBackground=true starts it as run_background does and returns its processId at once.",
		InputSchema: schemaOf[macCommandInput]("run_command"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}}, m.command)
	ls := schemaOf[macListInput]("list_processes")
	ls.Properties["status"].Enum = []any{"starting", "running", "stopped", "failed", "killed"}
	sdk.AddTool(srv, &sdk.Tool{Name: "list_processes", Description: "List background processes, optionally filtered by session or status, with CPU and memory per process (resources) and memory warnings.",
		InputSchema: ls, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, m.list)
	outs := schemaOf[macOutputInput]("get_process_output")
	outs.Properties["type"].Enum = []any{"all", "stdout", "stderr"}
	sdk.AddTool(srv, &sdk.Tool{Name: "get_process_output", Description: "Retrieve a background process's buffered output as lines (timestamp, type, content, lineNumber): the last lines (default 100), or lines from fromLine; type keeps stdout or stderr, each line keeping its number in the whole output.",
		InputSchema: outs, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, m.output)
	sdk.AddTool(srv, &sdk.Tool{Name: "stream_process_output", Description: "Wait for new output lines of a background process (up to timeout seconds) and return them with nextLine, the afterLine of the next call.",
		InputSchema: schemaOf[macStreamInput]("stream_process_output"), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, m.stream)
	sdk.AddTool(srv, &sdk.Tool{Name: "kill_process", Description: "Send a signal to a background process (default SIGTERM: the whole process tree, then SIGKILL after 2 s; force=true: SIGKILL; SIGSTOP pauses it, SIGCONT continues it).",
		InputSchema: schemaOf[macKillInput]("kill_process"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}}, m.kill)
	sdk.AddTool(srv, &sdk.Tool{Name: "clear_process_output", Description: "Clear a background process's buffered output (the memory it holds); line numbers go on counting from where they were.",
		InputSchema: schemaOf[macClearInput]("clear_process_output"), Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}}, m.clear)
	m.addSessionTools(srv)
}

// macError words an error about process ref as the macOS Shell server does.
func macError(ref string, err error) error {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process '%s' not found", textclean.Echo(ref))
	case errors.Is(err, jobs.ErrNotRunning):
		//lint:ignore ST1005 the original's wording, capital letter included
		return fmt.Errorf("Process '%s' is not running", textclean.Echo(ref))
	}
	return describe(ref, err)
}

// startError words a refused start; a limit names the document's.
func startError(err error) error {
	if errors.Is(err, jobs.ErrLimit) {
		return fmt.Errorf("background process limit reached (at most %d per session, %d in all): %w", macPerSession, macTotal, err)
	}
	return describe("", err)
}

// macStart starts a command of session as the document spawns it: with the
// session's directory and environment under the call's, stdin ignored, in
// its own process group, under zsh when installed. background jobs run
// until they end or are killed; timeout bounds a foreground run_command.
func (m *macShell) start(ctx context.Context, in macRunInput, timeout time.Duration) (jobs.Job, macMeta, error) {
	if strings.TrimSpace(in.Command) == "" {
		return jobs.Job{}, macMeta{}, argError("command is required and must not be empty")
	}
	meta := macMeta{Command: in.Command, Args: append([]string{}, in.Args...), BufferSize: macBufferSize}
	if in.BufferSize != nil {
		if *in.BufferSize < 1 || *in.BufferSize > macMaxBufferSize {
			return jobs.Job{}, meta, argError("bufferSize must be between 1 and %d lines, got %d", macMaxBufferSize, *in.BufferSize)
		}
		meta.BufferSize = int64(*in.BufferSize)
	}
	for k := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return jobs.Job{}, meta, argError("env: bad variable name \"%s\"", textclean.Echo(k))
		}
	}
	sess, err := m.useSession(in.Session)
	if err != nil {
		return jobs.Job{}, meta, err
	}
	// The document spawns command and args with a shell, which joins
	// them with spaces and reads the result as one command line.
	line := in.Command
	if len(in.Args) > 0 {
		line += " " + strings.Join(in.Args, " ")
	}
	env := map[string]string{}
	for k, v := range sess.Env {
		env[k] = v
	}
	for k, v := range in.Env {
		env[k] = v
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = sess.Cwd
	}
	spec, err := specFor(executeInput{Command: line, Cwd: cwd, Env: env})
	if err != nil {
		return jobs.Job{}, meta, err
	}
	spec.Shell = m.shell
	spec.Label = sess.Name
	spec.NoStdin = true // stdio: ['ignore', 'pipe', 'pipe']
	spec.TTL = macTTL
	spec.Timeout = jobs.Unlimited
	if timeout > 0 {
		spec.Timeout = timeout
	}
	spec.MaxRunningInScope = macTotal
	spec.MaxRunningWithLabel = macPerSession
	job, err := m.c.Start(ctx, spec)
	if err != nil {
		return jobs.Job{}, meta, startError(err)
	}
	m.recordMeta(ctx, job.ID, meta)
	return job, meta, nil
}

// recordMeta keeps what the job was started with, in memory and, when it
// differs from what a later server would guess, on the job's trail.
func (m *macShell) recordMeta(ctx context.Context, id string, meta macMeta) {
	m.mu.Lock()
	m.meta[id] = meta
	m.mu.Unlock()
	b, err := json.Marshal(meta)
	if err != nil {
		return
	}
	// Best effort: without the note a later server shows the command
	// line whole and the default buffer.
	_, _ = m.c.NoteOnce(ctx, id, macMetaNote+string(b))
}

// metaOf is what job j was started with: remembered, read from its
// trail, or, for a job this profile did not start, its command line whole
// and the default buffer.
func (m *macShell) metaOf(ctx context.Context, j jobs.Job) macMeta {
	m.mu.Lock()
	meta, ok := m.meta[j.ID]
	m.mu.Unlock()
	if ok {
		return meta
	}
	meta = macMeta{Command: j.Command, Args: []string{}, BufferSize: macBufferSize}
	if evs, err := m.c.History(ctx, j.ID); err == nil {
		for _, e := range evs {
			if e.Kind != "note" {
				continue
			}
			var d struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(e.Detail, &d) != nil || !strings.HasPrefix(d.Message, macMetaNote) {
				continue
			}
			var got macMeta
			if json.Unmarshal([]byte(strings.TrimPrefix(d.Message, macMetaNote)), &got) == nil && got.BufferSize > 0 {
				meta = got
				if meta.Args == nil {
					meta.Args = []string{}
				}
			}
			break
		}
	}
	m.mu.Lock()
	m.meta[j.ID] = meta
	m.mu.Unlock()
	return meta
}

func (m *macShell) run(ctx context.Context, req *sdk.CallToolRequest, in macRunInput) (*sdk.CallToolResult, any, error) {
	job, meta, err := m.start(ctx, in, 0)
	if err != nil {
		return nil, nil, err
	}
	return jsonResult(m.started(job, meta))
}

// started is run_background's result: the document's processId, pid and
// status, and what jobs adds.
func (m *macShell) started(job jobs.Job, meta macMeta) map[string]any {
	res := map[string]any{"processId": job.ID, "pid": job.PID, "status": macStatus(job), "sessionName": sessionOf(job), "bufferSize": meta.BufferSize}
	if sh := shellOf(job); sh != "" {
		res["shell"] = sh
	}
	if job.Status == jobs.StatusFailed && job.Reason != "" {
		res["error"] = job.Reason
	}
	return res
}

// shellOf is the shell that runs job's command line, from its argv.
func shellOf(j jobs.Job) string {
	if len(j.Argv) == 3 && j.Argv[1] == "-c" {
		return j.Argv[0]
	}
	return ""
}

// sessionOf is the session of job j: its label, "default" for none.
func sessionOf(j jobs.Job) string {
	if j.Label == "" {
		return macDefaultSession
	}
	return j.Label
}

func (m *macShell) command(ctx context.Context, req *sdk.CallToolRequest, in macCommandInput) (*sdk.CallToolResult, any, error) {
	run := macRunInput{Command: in.Command, Args: in.Args, Session: in.Session, Cwd: in.Cwd, Env: in.Env, BufferSize: in.BufferSize}
	if in.RunInBackground {
		job, meta, err := m.start(ctx, run, 0)
		if err != nil {
			return nil, nil, err
		}
		res := m.started(job, meta)
		res["note"] = "started in the background (runInBackground); run_background does the same"
		return jsonResult(res)
	}
	if in.BufferSize != nil {
		return nil, nil, argError("bufferSize applies to background processes: set runInBackground=true or use run_background")
	}
	timeout := macCommandTimeout
	if in.Timeout != nil {
		if *in.Timeout < 1 || float64(*in.Timeout) > maxSeconds*1000 {
			return nil, nil, argError("timeout must be a positive number of milliseconds, got %d", *in.Timeout)
		}
		timeout = time.Duration(*in.Timeout) * time.Millisecond
	}
	outLines, errLines := int64(macOutputLines), int64(macErrorLines)
	for _, p := range []struct {
		name string
		in   *count
		out  *int64
	}{{"maxOutputLines", in.MaxOutputLines, &outLines}, {"maxErrorLines", in.MaxErrorLines, &errLines}} {
		if p.in == nil {
			continue
		}
		if *p.in < 0 {
			return nil, nil, argError("%s must not be negative, got %d", p.name, *p.in)
		}
		*p.out = min(int64(*p.in), maxLogLines)
	}
	job, meta, err := m.start(ctx, run, timeout)
	if err != nil {
		return nil, nil, err
	}
	// No call outlives the bound: a command still running then goes on as
	// a background process, and the result says how to follow it.
	wait := min(timeout+time.Second, m.bound)
	if _, err := m.c.Wait(ctx, []string{job.ID}, jobs.WaitOptions{Timeout: wait}); err != nil && ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	j, err := m.c.Get(ctx, job.ID)
	if err != nil {
		return nil, nil, macError(job.ID, err)
	}
	if !j.Status.Terminal() {
		res := m.started(j, meta)
		res["note"] = fmt.Sprintf("still running after %s (the most one call waits): it goes on as a background process; follow it with get_process_output or stream_process_output, end it with kill_process", round(wait))
		return jsonResult(res)
	}
	res := map[string]any{"command": j.Command, "duration": j.Runtime.Milliseconds(), "exitCode": j.ExitCode, "success": j.Status == jobs.StatusDone}
	trunc := map[string]any{}
	for _, p := range []struct {
		stream jobs.Stream
		n      int64
	}{{jobs.Stdout, outLines}, {jobs.Stderr, errLines}} {
		text, total, err := m.streamTail(ctx, j.ID, p.stream, p.n)
		if err != nil {
			return nil, nil, macError(j.ID, err)
		}
		res[string(p.stream)] = text
		if shown := int64(len(splitLines(text))); total > shown {
			trunc[string(p.stream)] = map[string]int64{"totalLines": total, "returnedLines": shown}
		}
	}
	if len(trunc) > 0 {
		res["truncation"] = trunc
	}
	switch j.Status {
	case jobs.StatusTimedOut:
		res["error"] = fmt.Sprintf("Command timed out after %dms", timeout.Milliseconds())
	case jobs.StatusFailed:
		if j.Reason != "" {
			res["error"] = j.Reason
		}
	}
	// A foreground command leaves no background process behind, as the
	// server's run_command leaves none; its events stay on the audit
	// trail.
	if _, err := m.c.Remove(context.WithoutCancel(ctx), j.ID); err == nil {
		m.mu.Lock()
		delete(m.meta, j.ID)
		m.mu.Unlock()
	}
	r, sc, err := jsonResult(res)
	if r != nil && j.Status != jobs.StatusDone {
		r.IsError = true
	}
	return r, sc, err
}

// streamTail is the last n lines of one stream of job id, cleaned, and how
// many lines that stream wrote.
func (m *macShell) streamTail(ctx context.Context, id string, s jobs.Stream, n int64) (string, int64, error) {
	from, k, err := m.streamTailRange(ctx, id, s, max(n, 1), jobs.FirstLine)
	if err != nil || k == 0 {
		return "", 0, err
	}
	total := from + k - jobs.FirstLine
	if n == 0 {
		return "", total, nil
	}
	o, err := m.c.Log(ctx, id, jobs.Range{FromLine: from, Lines: k, Stream: s, Clean: true})
	if err != nil {
		return "", 0, err
	}
	return strings.TrimSuffix(o.Text, "\n"), total, nil
}

// lineCount is how many lines a read's output has in all: its newlines,
// and an unfinished last line when the read ends with one.
func lineCount(o jobs.Output) int64 {
	n := o.TotalLines
	if o.OmittedAfter == 0 && o.Text != "" && !strings.HasSuffix(o.Text, "\n") {
		n++
	}
	return n
}

// splitLines splits text at its newlines; "" has none.
func splitLines(text string) []string {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// view is job j as list_processes shows it.
func (m *macShell) view(ctx context.Context, j jobs.Job, usage map[string]jobs.Resources, memTotalKB int64) macProc {
	meta := m.metaOf(ctx, j)
	p := macProc{ID: j.ID, SessionName: sessionOf(j), Command: meta.Command, Args: meta.Args, Status: macStatus(j),
		StartTime: stamp(&j.CreatedAt), Runtime: j.Runtime.Milliseconds(), OutputLines: j.OutputLines, ExitCode: j.ExitCode,
		EndTime: stamp(j.EndedAt), Paused: macPaused(j), Shell: shellOf(j), BufferSize: meta.BufferSize,
		BufferBytes: max(j.OutputBytes-j.EvictedBytes-j.DroppedBytes, 0), job: j}
	if j.StartedAt != nil {
		p.StartTime = stamp(j.StartedAt)
	}
	if j.PID > 0 {
		p.PID = &j.PID
	}
	p.Resources = macResourcesOf(j, usage, memTotalKB)
	return p
}

func (m *macShell) list(ctx context.Context, req *sdk.CallToolRequest, in macListInput) (*sdk.CallToolResult, any, error) {
	f := jobs.Filter{Limit: macListMax}
	if in.Status != "" {
		st, ok := macStatuses[in.Status]
		if !ok {
			return nil, nil, argError("status must be one of starting, running, stopped, failed, killed, got \"%s\"", textclean.Echo(in.Status))
		}
		f.Statuses = st
	}
	list, err := m.c.List(ctx, f)
	if err != nil {
		return nil, nil, describe("", err)
	}
	out := struct {
		Processes        []macProc `json:"processes"`
		Truncated        bool      `json:"truncated,omitempty"`
		TotalBufferBytes int64     `json:"totalBufferBytes"`
		Warnings         []string  `json:"warnings"`
	}{Processes: []macProc{}, Truncated: len(list) >= macListMax, Warnings: []string{}}
	memTotal, usage := jobs.MemTotalKB(), macUsage(ctx, m.c, list)
	for _, j := range list {
		if in.Session != "" && sessionOf(j) != in.Session || in.Status != "" && macStatus(j) != in.Status {
			continue
		}
		p := m.view(ctx, j, usage, memTotal)
		if in.IncludeOutput {
			lines, _, err := m.lines(ctx, j, macRange{tail: macRecentLines, first: m.firstBuffered(ctx, j, p.BufferSize)})
			if err != nil {
				return nil, nil, macError(j.ID, err)
			}
			recent := make([]string, len(lines))
			for i, l := range lines {
				recent[i] = l.Content
			}
			p.RecentOutput = &recent
		}
		out.Processes = append(out.Processes, p)
		out.TotalBufferBytes += p.BufferBytes
	}
	out.Warnings = append(out.Warnings, macWarnings(out.Processes, out.TotalBufferBytes)...)
	return jsonResult(out)
}

// firstBuffered is the number of the oldest line in job j's buffer of
// size lines: the document's ring keeps the newest ones.
func (m *macShell) firstBuffered(ctx context.Context, j jobs.Job, size int64) int64 {
	o, err := m.c.Log(ctx, j.ID, jobs.Range{TailLines: 1, Clean: true})
	if err != nil {
		return jobs.FirstLine
	}
	return max(jobs.FirstLine, lineCount(o)-size+1)
}

// macRange is a selection of lines: from line from (the combined
// output's numbers) for n lines, or the last tail lines; of one stream or
// all; never before line first (the oldest buffered).
type macRange struct {
	from, n, tail int64
	stream        jobs.Stream
	first         int64
}

// lines reads the lines r selects of job j, each with its own stream,
// time and number in the combined output. It also returns the read.
func (m *macShell) lines(ctx context.Context, j jobs.Job, r macRange) ([]macLine, jobs.Output, error) {
	r.first = max(r.first, jobs.FirstLine)
	q := jobs.Range{Stream: r.stream, Clean: true}
	switch {
	case r.from > 0 && r.stream == "":
		q.FromLine, q.Lines = max(r.from, r.first), r.n
	case r.from > 0:
		// The stream's own numbering starts where the combined line is.
		from, err := m.c.StreamLineAt(ctx, j.ID, r.stream, max(r.from, r.first))
		if err != nil {
			return nil, jobs.Output{}, err
		}
		q.FromLine, q.Lines = from, r.n
	case r.stream == "":
		q.TailLines = r.tail
	default:
		// The last lines of one stream, read by the stream's own
		// numbers (a tail's first line is numbered in the combined
		// output, which the stream's marks do not count in).
		from, n, err := m.streamTailRange(ctx, j.ID, r.stream, r.tail, r.first)
		if err != nil {
			return nil, jobs.Output{}, err
		}
		if n == 0 {
			return []macLine{}, jobs.Output{}, nil
		}
		q.FromLine, q.Lines = from, n
	}
	o, err := m.c.Log(ctx, j.ID, q)
	if err != nil {
		return nil, o, err
	}
	split := splitLines(o.Text)
	if len(split) == 0 {
		return []macLine{}, o, nil
	}
	// Each line's stream, number and time: the stream that wrote its end
	// and the time of the stored chunk holding that end (jobs stores
	// output in chunks of up to about 1 KiB, each stamped with its latest
	// write).
	marks, err := m.c.LineMarks(ctx, j.ID, o.FirstLine, int64(len(split)), r.stream)
	if err != nil {
		return nil, o, err
	}
	fallback := stamp(j.LastOutputAt)
	if fallback == "" {
		fallback = stamp(&j.CreatedAt)
	}
	out := make([]macLine, 0, len(split))
	for i, l := range split {
		line := macLine{Timestamp: fallback, Type: string(r.stream), Content: l, LineNumber: o.FirstLine + int64(i)}
		if line.Type == "" {
			line.Type = "stdout"
		}
		if i < len(marks) {
			line.Timestamp = stamp(&marks[i].At)
			line.LineNumber = marks[i].Line
			if marks[i].Stream == jobs.Stderr {
				line.Type = "stderr"
			} else {
				line.Type = "stdout"
			}
		}
		if line.LineNumber < r.first {
			continue // older than the buffer holds
		}
		out = append(out, line)
	}
	return out, o, nil
}

// streamTailRange is where the last n lines of stream s of job id start,
// in the stream's own numbering, and how many there are, none before
// combined line first.
func (m *macShell) streamTailRange(ctx context.Context, id string, s jobs.Stream, n, first int64) (int64, int64, error) {
	lo, err := m.c.StreamLineAt(ctx, id, s, first)
	if err != nil {
		return 0, 0, err
	}
	// Past every newline of the stream: its complete lines, plus one.
	end, err := m.c.StreamLineAt(ctx, id, s, math.MaxInt64/2)
	if err != nil {
		return 0, 0, err
	}
	last := end - 1
	if o, err := m.c.Log(ctx, id, jobs.Range{FromLine: end, Lines: 1, Stream: s}); err != nil {
		return 0, 0, err
	} else if o.Text != "" {
		last = end // an unfinished last line
	}
	from := max(lo, last-n+1)
	return from, max(last-from+1, 0), nil
}

func (m *macShell) output(ctx context.Context, req *sdk.CallToolRequest, in macOutputInput) (*sdk.CallToolResult, any, error) {
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
		if *in.FromLine < 0 {
			return nil, nil, argError("fromLine must not be negative, got %d", *in.FromLine)
		}
		from = max(int64(*in.FromLine), jobs.FirstLine) // 0, as a 0-based client says it, is the first line too
	}
	var stream jobs.Stream
	switch in.Type {
	case "", "all":
	case "stdout", "stderr":
		stream = jobs.Stream(in.Type)
	default:
		return nil, nil, argError("type must be all, stdout or stderr, got \"%s\"", textclean.Echo(in.Type))
	}
	j, err := m.c.Get(ctx, in.ProcessID)
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	meta := m.metaOf(ctx, j)
	all, err := m.c.Log(ctx, j.ID, jobs.Range{TailLines: 1, Clean: true})
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	total := lineCount(all)
	first := max(jobs.FirstLine, total-meta.BufferSize+1)
	r := macRange{from: from, n: n, stream: stream, first: first}
	if from == 0 {
		r.tail = min(n, max(total-first+1, 0))
		if stream != "" {
			r.tail = n
		}
	}
	var lines []macLine
	if from > 0 || r.tail > 0 {
		if lines, _, err = m.lines(ctx, j, r); err != nil {
			return nil, nil, macError(in.ProcessID, err)
		}
	} else {
		lines = []macLine{}
	}
	p := m.view(ctx, j, macUsage(ctx, m.c, []jobs.Job{j}), jobs.MemTotalKB())
	return jsonResult(macOutput{ProcessID: j.ID, Status: macStatus(j), TotalLines: total, RequestedLines: n, Output: lines,
		BufferSize: meta.BufferSize, DroppedLines: first - jobs.FirstLine, Paused: p.Paused, Resources: p.Resources,
		Warnings: macWarnings([]macProc{p}, p.BufferBytes)})
}

func (m *macShell) stream(ctx context.Context, req *sdk.CallToolRequest, in macStreamInput) (*sdk.CallToolResult, any, error) {
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
	wait = min(wait, m.bound)
	var after int64
	if in.AfterLine != nil {
		after = max(int64(*in.AfterLine), 0)
	}
	deadline := time.Now().Add(wait)
	// Woken by a change of the database, not on a timer: a stream of a
	// quiet process costs nothing while it waits.
	ch := m.c.Changes()
	defer ch.Close()
	for {
		j, err := m.c.Get(ctx, in.ProcessID)
		if err != nil {
			return nil, nil, macError(in.ProcessID, err)
		}
		// A line is complete at its newline; a finished job's last
		// unfinished line counts too.
		done := j.Status.Terminal()
		if j.OutputLines > after || done || !time.Now().Before(deadline) {
			lines, o, err := m.lines(ctx, j, macRange{from: after + 1, n: maxLogLines})
			if err != nil {
				return nil, nil, macError(in.ProcessID, err)
			}
			if !done && o.Text != "" && !strings.HasSuffix(o.Text, "\n") && len(lines) > 0 {
				lines = lines[:len(lines)-1] // the unfinished line comes next time
			}
			next := after
			if len(lines) > 0 {
				next = lines[len(lines)-1].LineNumber
			}
			return jsonResult(macOutput{ProcessID: j.ID, Status: macStatus(j), TotalLines: o.TotalLines, RequestedLines: int64(len(lines)), Output: lines, NextLine: next, Paused: macPaused(j)})
		}
		// Every look that did not return found nothing for this
		// process; the bound lets a read notice a supervisor that died.
		ch.Looked(false)
		if err := ch.Wait(ctx, min(time.Until(deadline), macStreamLook)); err != nil {
			return nil, nil, err
		}
	}
}

func (m *macShell) kill(ctx context.Context, req *sdk.CallToolRequest, in macKillInput) (*sdk.CallToolResult, any, error) {
	if in.ProcessID == "" {
		return nil, nil, argError("processId is required")
	}
	j, err := m.c.Get(ctx, in.ProcessID)
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	prev := macStatus(j)
	sig := in.Signal
	if in.Force {
		sig = "KILL"
	}
	// The engine's one decision (jobs.Client.KillSignal): SIGTERM (the
	// default) and SIGKILL, by name or number, end the whole tree and
	// record it killed; any other signal is sent once. A finished job's
	// leftovers are ended too.
	k, err := m.c.KillSignal(ctx, j.ID, sig, 0)
	if errors.Is(err, jobs.ErrNotRunning) && j.Status.Terminal() {
		// A signal that does not end a job, to one that has ended.
		k, err = jobs.KillResult{JobID: j.ID, Status: j.Status, AlreadyDone: true, Signalled: []int{}, Survivors: []int{}}, nil
	}
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	killed := !k.AlreadyDone || len(k.Signalled) > 0
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(sig)), "SIG")
	if j, err = m.settle(ctx, j.ID, name, killed); err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	out := map[string]any{"processId": j.ID, "previousStatus": prev, "newStatus": macStatus(j), "killed": killed,
		"signalled": k.Signalled, "survivors": k.Survivors, "escalated": k.Escalated, "alreadyDone": k.AlreadyDone}
	if k.Signal != "" {
		out["signal"] = k.Signal
	}
	if k.Unreached != "" {
		out["unreached"] = k.Unreached
	}
	return jsonResult(out)
}

// settle reads job id after kill_process signalled it. A STOP or CONT
// takes effect when the kernel next schedules the process, so for those
// it waits (up to macSignalSettle) until the state shows it: newStatus
// then says stopped after SIGSTOP and running after SIGCONT.
func (m *macShell) settle(ctx context.Context, id, sig string, sent bool) (jobs.Job, error) {
	want := map[string]bool{"STOP": true, "TSTP": true, "TTIN": true, "TTOU": true, "CONT": false}
	stopped, ok := want[sig]
	deadline := time.Now().Add(macSignalSettle)
	for {
		j, err := m.c.Get(ctx, id)
		if err != nil || !sent || !ok || j.Status.Terminal() || j.Stopped == stopped || !time.Now().Before(deadline) {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (m *macShell) clear(ctx context.Context, req *sdk.CallToolRequest, in macClearInput) (*sdk.CallToolResult, any, error) {
	if in.ProcessID == "" {
		return nil, nil, argError("processId is required")
	}
	j, err := m.c.Get(ctx, in.ProcessID)
	if err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	if err := m.c.Clear(ctx, j.ID); err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	freed := max(j.OutputBytes-j.EvictedBytes-j.DroppedBytes, 0)
	if j, err = m.c.Get(ctx, j.ID); err != nil {
		return nil, nil, macError(in.ProcessID, err)
	}
	return jsonResult(map[string]any{"processId": j.ID, "status": macStatus(j), "cleared": true, "freedBytes": freed,
		"totalLines": j.OutputLines, "note": "the buffered output is cleared; new lines are numbered after totalLines"})
}

// macResources is what a process uses, in the macOS Shell server's
// words: cpu (percent of one CPU), memory (MB resident) and memoryPercent
// (of the machine's), plus the CPU time in milliseconds and where the
// figures come from: "live" (sampled from the running processes now,
// lastSampled) or "exit" (recorded when the process ended: its CPU time
// and the largest memory it reached).
type macResources struct {
	CPU           float64 `json:"cpu"`
	Memory        float64 `json:"memory"`
	MemoryPercent float64 `json:"memoryPercent"`
	CPUTime       int64   `json:"cpuTime"`
	LastSampled   string  `json:"lastSampled,omitempty"`
	Source        string  `json:"source"`
	Processes     int     `json:"processes,omitempty"`
}

// macUsage samples the jobs of list that run (or were lost), all in one
// walk of the process table, by id.
func macUsage(ctx context.Context, c *jobs.Client, list []jobs.Job) map[string]jobs.Resources {
	var ids []string
	for _, j := range list {
		if j.Status == jobs.StatusRunning || j.Status == jobs.StatusLost {
			ids = append(ids, j.ID)
		}
	}
	out := make(map[string]jobs.Resources, len(ids))
	if len(ids) == 0 {
		return out
	}
	rs, err := c.Resources(ctx, ids...)
	if err != nil {
		return out // a job removed meanwhile: no figures this time
	}
	for i, id := range ids {
		out[id] = rs[i]
	}
	return out
}

// macResourcesOf is job j's resources: sampled while it runs (or was lost
// with processes alive: usage, from macUsage), else recorded at its end;
// nil when nothing is known (a running job where the kernel cannot be
// asked). memTotalKB is the machine's memory.
func macResourcesOf(j jobs.Job, usage map[string]jobs.Resources, memTotalKB int64) *macResources {
	u, sampled := usage[j.ID]
	switch {
	case sampled && (u.Live || j.Status == jobs.StatusLost):
	case j.Status.Terminal():
		u = jobs.Resources{CPU: j.UserCPU + j.SysCPU, RSSKB: j.MaxRSSKB}
	default:
		return nil
	}
	out := &macResources{Memory: round1(float64(u.RSSKB) / 1024), CPUTime: u.CPU.Milliseconds(), Source: "exit", Processes: u.Processes}
	if u.Live {
		out.Source, out.LastSampled = "live", stamp(&u.At)
	}
	if j.Runtime > 0 {
		out.CPU = round1(100 * float64(u.CPU) / float64(j.Runtime))
	}
	if memTotalKB > 0 {
		out.MemoryPercent = round1(100 * float64(u.RSSKB) / float64(memTotalKB))
	}
	return out
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// Memory warnings ("Monitor total buffer memory usage, warn when
// approaching limits"): a process's stored output near its cap, the
// buffers of all listed processes past macTotalBufferWarn, a process
// using more than macMemoryWarnPercent of the machine's memory.
const (
	macBufferWarnShare   = 0.8
	macTotalBufferWarn   = 512 << 20
	macMemoryWarnPercent = 50
)

// macWarnings is the memory warnings of processes, whose buffers hold
// totalBuffer bytes.
func macWarnings(processes []macProc, totalBuffer int64) []string {
	var out []string
	for _, p := range processes {
		if cap := p.job.MaxOutput; cap > 0 && float64(p.BufferBytes) >= macBufferWarnShare*float64(cap) {
			out = append(out, fmt.Sprintf("process %s: output buffer holds %s, %d%% of its %s limit (past it the oldest output after the first MiB is dropped); clear_process_output frees it",
				p.ID, sizeText(p.BufferBytes), 100*p.BufferBytes/cap, sizeText(cap)))
		}
		if r := p.Resources; r != nil && r.Source == "live" && r.MemoryPercent >= macMemoryWarnPercent {
			out = append(out, fmt.Sprintf("process %s: uses %.0f MB, %.0f%% of the machine's memory", p.ID, r.Memory, r.MemoryPercent))
		}
	}
	if totalBuffer >= macTotalBufferWarn {
		out = append(out, fmt.Sprintf("output buffers hold %s in all (warning from %s); clear_process_output frees a process's", sizeText(totalBuffer), sizeText(macTotalBufferWarn)))
	}
	return out
}

// sizeText is a byte count for people: 512 MiB, 3.2 KiB, 17 bytes.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(round1(float64(n)/(1<<20)), 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(round1(float64(n)/(1<<10)), 'f', -1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
