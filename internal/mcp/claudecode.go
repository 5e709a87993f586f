package mcp

// The claude-code profile: seed document 004, Claude Code-style background
// shells, is its specification (docs/profiles/claude-code.md has the
// requirements, and e2e/mcpclient/conformance/004-claude-code.mjs checks
// them). run_command with run_in_background is the document's
// spawnBackground; bash_output reads the lines that are new since the last
// read; kill_shell ends a process; list_shells lists them. The document
// keeps processes in memory (20 listed, 10000 lines a buffer); here they
// are jobs, kept whole in the database and seen by every profile, and the
// profile answers in the document's words and counts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// claudeValidation is the document's validation wait: a background
	// command is reported as it stands 1.5 s after its start. A job that
	// ends sooner reads then as it will at 1.5 s, so the call returns at
	// its end.
	claudeValidation = 1500 * time.Millisecond
	// claudeTimeout is the document's default maximum runtime (10 minutes).
	claudeTimeout = 10 * time.Minute
	// claudeKillGrace is the document's SIGTERM-to-SIGKILL delay.
	claudeKillGrace = 5 * time.Second
)

func claudeInstructions(scope string) string {
	return "jobs runs shell commands as durable background jobs (scope " + strconv.Quote(scope) + "). " +
		"run_command with run_in_background=true starts a background shell and returns its id; " +
		"bash_output reads only the output that is new since the last read (filter keeps matching lines), whole lines of each stream, " +
		"at most about " + strconv.Itoa(resultChars) + " bytes a read: pending counts the bytes left for the next read; " +
		"kill_shell ends one; list_shells lists them. Jobs and their full output survive a restart of this server."
}

// claudeRunInput is run_command's arguments.
type claudeRunInput struct {
	Command         string   `json:"command" jsonschema:"the shell command line"`
	RunInBackground bool     `json:"run_in_background,omitempty" jsonschema:"start it in the background and return its id after a short check that it started"`
	Cwd             string   `json:"cwd,omitempty" jsonschema:"working directory (default: the server's)"`
	Timeout         *float64 `json:"timeout,omitempty" jsonschema:"maximum runtime in milliseconds (default 600000)"`
	Description     string   `json:"description,omitempty" jsonschema:"what the command does, in a few words"`
}

type claudeOutputInput struct {
	BashID string `json:"bash_id" jsonschema:"The process ID returned when starting the background process"`
	Filter string `json:"filter,omitempty" jsonschema:"Optional regex to filter output lines (only matching lines returned)"`
}

type claudeKillInput struct {
	ShellID string `json:"shell_id" jsonschema:"The process ID to kill"`
}

type claudeListInput struct{}

// claudeSpawn is run_command's result, as the document's spawnBackground
// returns it. Additions: the exit code of a process that exited within the
// call, and the output of a foreground run_command.
type claudeSpawn struct {
	ID       string `json:"id"`
	Message  string `json:"message"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Output   string `json:"output,omitempty"`
}

// claudeOutput is bash_output's result (the document's ProcessOutput).
type claudeOutput struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	NewOutput string `json:"newOutput"`
	NewErrors string `json:"newErrors"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	// Pending counts new bytes this read left for the next one (an
	// addition: the document returns everything; a result here is
	// bounded, and ends with a whole line).
	Pending int64 `json:"pending,omitempty"`
}

type claudeKill struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

type claudeShell struct {
	ID          string `json:"id"`
	PID         int    `json:"pid,omitempty"`
	Command     string `json:"command"`
	Status      string `json:"status"`
	StartedAt   string `json:"startedAt"`
	Runtime     string `json:"runtime"`
	OutputLines int64  `json:"outputLines"`
	ErrorLines  int64  `json:"errorLines"`
	// EndedAt is when an ended process ended (an addition: the
	// document's runtime keeps counting after the end).
	EndedAt string `json:"endedAt,omitempty"`
}

type claudeShells struct {
	Shells []claudeShell `json:"shells"`
}

func addClaudeCode(s *server, srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "run_command",
		Description: "Run a shell command. With run_in_background: true it runs as a background process (dev servers, watchers, builds) and returns its id; use bash_output to read its output and kill_shell to stop it.",
		InputSchema: schemaOf[claudeRunInput]("run_command"),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.claudeRun)
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "bash_output",
		Description: "Read output from a running or completed background shell process. Returns only NEW output since the last read.",
		InputSchema: schemaOf[claudeOutputInput]("bash_output"),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, s.claudeOutput)
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "kill_shell",
		Description: "Terminate a running background shell process",
		InputSchema: schemaOf[claudeKillInput]("kill_shell"),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.claudeKill)
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "list_shells",
		Description: "List all background shell processes (running and recent completed)",
		InputSchema: schemaOf[claudeListInput]("list_shells"),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.claudeList)
}

// schemaOf is T's inferred input schema.
func schemaOf[T any](tool string) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("%s schema: %v", tool, err))
	}
	simplify(s)
	return s
}

// claudeStatus is a job's status in the document's words: running,
// completed, failed or killed. A timed-out job was killed by its timeout,
// as the document's is; a lost one (its supervisor died) counts as failed.
// (The document's exit handler turns a killed process into "failed" once
// it has exited; killed stays killed here, as kill_shell said.)
func claudeStatus(st jobs.Status) string {
	switch st {
	case jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning:
		return claudeRunning
	case jobs.StatusDone:
		return claudeCompleted
	case jobs.StatusKilled, jobs.StatusTimedOut:
		return claudeKilled
	default:
		return claudeFailed
	}
}

// The document's status words (its own vocabulary, not jobs').
const (
	claudeRunning   = "running"
	claudeCompleted = "completed"
	claudeKilled    = "killed"
	claudeFailed    = "failed"
)

func (s *server) claudeRun(ctx context.Context, req *sdk.CallToolRequest, in claudeRunInput) (*sdk.CallToolResult, any, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, argError("command is required and must not be empty")
	}
	// The document spawns with stdin ignored (/dev/null) and FORCE_COLOR=0
	// added to the server's environment.
	spec := jobs.Spec{Command: in.Command, Cwd: in.Cwd, Label: in.Description, Timeout: claudeTimeout,
		NoStdin: true, Env: []string{"FORCE_COLOR=0"}}
	if in.Timeout != nil {
		if *in.Timeout < 0 {
			return nil, nil, argError("timeout must not be negative, got %v", *in.Timeout)
		}
		if *in.Timeout > 0 {
			spec.Timeout = time.Duration(*in.Timeout * float64(time.Millisecond))
		}
	}
	job, err := s.c.Start(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		// The document's answer when spawn throws.
		return jsonResult(claudeSpawn{Message: "Failed to spawn: " + err.Error(), Status: claudeFailed})
	}
	window := claudeValidation
	if !in.RunInBackground {
		window = s.bound
	}
	if !job.Status.Terminal() {
		// A job that ends inside the window reads as it would at its end:
		// nothing changes after that, so the call need not wait it out.
		wr, err := s.c.Wait(ctx, []string{job.ID}, jobs.WaitOptions{Timeout: window})
		if err != nil {
			return nil, nil, fmt.Errorf("wait for process %s (it was started and may still run): %w", job.ID, err)
		}
		job = wr.Jobs[0]
	}
	if !in.RunInBackground && job.Status.Terminal() {
		return s.claudeForeground(ctx, job)
	}
	if claudeStatus(job.Status) == claudeFailed {
		return s.claudeFailed(ctx, job)
	}
	// Running after the validation wait, or ended without failing: the
	// document's "✓ Background process running" message either way.
	res := claudeSpawn{ID: job.ID, Status: claudeRunning, ExitCode: claudeExitCode(job)}
	var b strings.Builder
	b.WriteString("✓ Background process running\n")
	pid := "?"
	if job.PID > 0 {
		pid = strconv.Itoa(job.PID)
	}
	fmt.Fprintf(&b, " PID: %s\n ID: %s\n Command: %s\n", pid, job.ID, in.Command)
	n, lines, err := s.claudeLines(ctx, job, claudeOut(job), 8)
	if err != nil {
		return nil, nil, describe(job.ID, err)
	}
	if n > 0 {
		fmt.Fprintf(&b, " Initial output (%d lines):\n", n)
		for _, l := range lines {
			b.WriteString(" " + l + "\n")
		}
		if n > 8 {
			fmt.Fprintf(&b, " ... +%d more lines\n", n-8)
		}
	}
	n, lines, err = s.claudeErrors(ctx, job, 4)
	if err != nil {
		return nil, nil, describe(job.ID, err)
	}
	if n > 0 {
		fmt.Fprintf(&b, " Stderr (%d lines):\n", n)
		for _, l := range lines {
			b.WriteString(" " + l + "\n")
		}
	}
	if !in.RunInBackground {
		fmt.Fprintf(&b, " Still running after %s; it continues in the background.\n", round(s.bound))
	}
	fmt.Fprintf(&b, " Use bash_output(%q) to check output, kill_shell(%q) to stop.", job.ID, job.ID)
	res.Message = b.String()
	return jsonResult(res)
}

// claudeFailed is the document's "✕ Process failed immediately" result:
// the command, its error lines (stderr, then the document's own notes),
// and its exit code when it exited with one.
func (s *server) claudeFailed(ctx context.Context, job jobs.Job) (*sdk.CallToolResult, any, error) {
	b, err := s.claudeFailure(ctx, job, "✕ Process failed immediately")
	if err != nil {
		return nil, nil, err
	}
	return jsonResult(claudeSpawn{ID: job.ID, Message: b, Status: claudeFailed, ExitCode: claudeExitCode(job)})
}

func (s *server) claudeFailure(ctx context.Context, job jobs.Job, head string) (string, error) {
	lines := []string{head, " Command: " + job.Command}
	n, errs, err := s.claudeErrors(ctx, job, claudeBufferLines)
	if err != nil {
		return "", describe(job.ID, err)
	}
	if n > 0 {
		lines = append(lines, " Error: "+strings.Join(errs, "\n "))
	}
	if code := claudeExitCode(job); code != nil {
		lines = append(lines, fmt.Sprintf(" Exit code: %d", *code))
	}
	return strings.Join(lines, "\n"), nil
}

// claudeForeground is the result of a run_command without
// run_in_background that ended within the call (the document has no
// foreground mode; this one returns the output and exit code too).
func (s *server) claudeForeground(ctx context.Context, job jobs.Job) (*sdk.CallToolResult, any, error) {
	// The output returned here does not count as read: Poll leaves the
	// read cursor where it is, so bash_output still returns it.
	pr, err := s.c.Poll(ctx, job.ID, jobs.PollOptions{Tail: resultChars})
	if err != nil {
		return nil, nil, describe(job.ID, err)
	}
	status := claudeStatus(job.Status)
	res := claudeSpawn{ID: job.ID, Status: status, ExitCode: claudeExitCode(job), Output: pr.Output.Text}
	if status == "completed" {
		res.Message = "✓ Process completed\n Command: " + job.Command + "\n Exit code: 0"
		return jsonResult(res)
	}
	if res.Message, err = s.claudeFailure(ctx, job, "✕ Process "+status); err != nil {
		return nil, nil, err
	}
	return jsonResult(res)
}

// claudeExitCode is the document's exitCode: the code the process exited
// with, none while it runs or when a signal ended it (Node's code is null
// then).
func claudeExitCode(j jobs.Job) *int {
	if !j.Status.Terminal() || j.Signal != "" {
		return nil
	}
	return j.ExitCode
}

// claudeFind is the document's lookup of a process: its id (here also a
// unique prefix or a name), else the first process of the registry, in
// the order started, whose id contains ref.
func (s *server) claudeFind(ctx context.Context, ref string) (jobs.Job, error) {
	j, err := s.c.Get(ctx, ref)
	if err == nil || !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrAmbiguous) {
		return j, err
	}
	reg, rerr := s.claudeRegistry(ctx)
	if rerr != nil {
		return jobs.Job{}, rerr
	}
	for _, r := range reg {
		if strings.Contains(r.ID, ref) {
			return r, nil
		}
	}
	return jobs.Job{}, err
}

func (s *server) claudeOutput(ctx context.Context, req *sdk.CallToolRequest, in claudeOutputInput) (*sdk.CallToolResult, any, error) {
	if in.BashID == "" {
		return nil, nil, argError("bash_id is required")
	}
	j, err := s.claudeFind(ctx, in.BashID)
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, jobs.ErrAmbiguous) {
		return claudeError(map[string]string{"error": "Process not found: " + textclean.Echo(in.BashID) + ". Use list_shells to see available processes."})
	}
	if err != nil {
		return nil, nil, describe(in.BashID, err)
	}
	r, err := s.claudeReadNew(ctx, j.ID)
	if err != nil {
		return nil, nil, describe(in.BashID, err)
	}
	// The document applies the filter after it moved its read indices:
	// lines filtered out count as read.
	out, errs := r.stdout, r.stderr
	if in.Filter != "" {
		if re, err := regexp.Compile("(?i)" + in.Filter); err == nil {
			keep := func(l string) bool { return !re.MatchString(l) }
			out, errs = slices.DeleteFunc(out, keep), slices.DeleteFunc(errs, keep)
		}
	}
	return jsonResult(claudeOutput{ID: r.job.ID, Status: claudeStatus(r.job.Status), NewOutput: strings.Join(out, "\n"),
		NewErrors: strings.Join(errs, "\n"), ExitCode: claudeExitCode(r.job), Pending: r.pending})
}

func (s *server) claudeKill(ctx context.Context, req *sdk.CallToolRequest, in claudeKillInput) (*sdk.CallToolResult, any, error) {
	if in.ShellID == "" {
		return nil, nil, argError("shell_id is required")
	}
	j, err := s.c.Get(ctx, in.ShellID)
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, jobs.ErrAmbiguous) {
		return jsonResult(claudeKill{Success: false, Message: "Process not found: " + textclean.Echo(in.ShellID)})
	}
	if err != nil {
		return nil, nil, describe(in.ShellID, err)
	}
	if j.Status.Terminal() {
		return jsonResult(claudeKill{Success: false, Message: "Process already " + claudeStatus(j.Status)})
	}
	// SIGTERM to the process group, SIGKILL after the document's 5 s.
	if _, err := s.c.Kill(ctx, j.ID, claudeKillGrace); err != nil {
		return nil, nil, describe(in.ShellID, err)
	}
	return jsonResult(claudeKill{Success: true, Message: "Process " + j.ID + " killed"})
}

func (s *server) claudeList(ctx context.Context, req *sdk.CallToolRequest, in claudeListInput) (*sdk.CallToolResult, any, error) {
	list, err := s.claudeRegistry(ctx)
	if err != nil {
		return nil, nil, describe("", err)
	}
	res := claudeShells{Shells: []claudeShell{}}
	now := time.Now()
	for _, j := range list {
		cmd := j.Command
		if r := []rune(cmd); len(r) > 50 {
			cmd = string(r[:47]) + "..."
		}
		started := j.CreatedAt
		if j.StartedAt != nil {
			started = *j.StartedAt
		}
		outN, _, err := s.claudeLines(ctx, j, claudeOut(j), 0)
		if err != nil {
			return nil, nil, describe(j.ID, err)
		}
		errN, _, err := s.claudeErrors(ctx, j, 0)
		if err != nil {
			return nil, nil, describe(j.ID, err)
		}
		// The document's runtime is the time since the start, also for a
		// process that ended.
		sh := claudeShell{ID: j.ID, Command: cmd, Status: claudeStatus(j.Status), StartedAt: started.UTC().Format("2006-01-02T15:04:05.000Z"),
			Runtime: claudeRuntime(now.Sub(started)), OutputLines: int64(outN), ErrorLines: int64(errN)}
		if !j.Status.Terminal() {
			sh.PID = j.PID
		}
		if j.EndedAt != nil {
			sh.EndedAt = j.EndedAt.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		res.Shells = append(res.Shells, sh)
	}
	text, err := json.Marshal(res.Shells)
	if err != nil {
		return nil, nil, fmt.Errorf("encode shells: %w", err)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}, res, nil
}

// claudeRuntime is the document's runtime words: 42s, 3m 5s, 2h 10m.
func claudeRuntime(d time.Duration) string {
	sec := int64(d / time.Second)
	switch {
	case sec < 60:
		return fmt.Sprintf("%ds", sec)
	case sec < 3600:
		return fmt.Sprintf("%dm %ds", sec/60, sec%60)
	}
	return fmt.Sprintf("%dh %dm", sec/3600, (sec%3600)/60)
}

// nonEmptyLines splits text into lines and drops the blank ones, as the
// original's buffers do.
func nonEmptyLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// jsonResult returns v as the document returns it: the JSON object as text,
// and as structured content.
func jsonResult(v any) (*sdk.CallToolResult, any, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode result: %w", err)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}, v, nil
}

// claudeError is jsonResult marked as a tool error.
func claudeError(v any) (*sdk.CallToolResult, any, error) {
	r, sc, err := jsonResult(v)
	if r != nil {
		r.IsError = true
	}
	return r, sc, err
}
