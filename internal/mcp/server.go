package mcp

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits that keep every call short and every result small.
const (
	// maxWait bounds how long one call may block (execute_command's yield
	// window, process wait). MCP clients time requests out (often after a
	// minute or two); a longer wait is split into several calls.
	maxWait = 120 * time.Second
	// defaultWait is process wait's timeout when none is given.
	defaultWait = 30 * time.Second
	// defaultYield is execute_command's window when neither yieldMs nor
	// PI_BASH_YIELD_MS says otherwise.
	defaultYield = 10 * time.Second
	// defaultPollChars is poll's output budget (the seeds' 500 characters).
	defaultPollChars = jobs.DefaultTailChars
	// resultChars bounds the output tail of a finished command's result
	// (execute_command, wait); waitChars the tail wait shows of a job that
	// still runs.
	resultChars = 20000
	waitChars   = 2000
	// defaultLogLines and maxLogLines bound a log page in lines;
	// maxPageChars bounds it in characters whatever the unit.
	defaultLogLines = 200
	maxLogLines     = 2000
	maxPageChars    = 64 << 10
	// defaultListJobs and maxListJobs bound a list page: an agent rarely
	// needs more than the newest few sessions, and each costs context.
	defaultListJobs = 20
	maxListJobs     = 100
	// maxWriteBytes bounds one write to stdin.
	maxWriteBytes = 16 << 20
	// maxCaptureLines bounds capture's scrollback.
	maxCaptureLines = 2000
)

// server holds what the tools share: the client and the poll back-off.
type server struct {
	c         *jobs.Client
	yield     time.Duration
	pollChars int64
	backoff   *backoff
}

// NewServer returns an MCP server whose tools act on c's scope. Run serves
// it on stdio; tests connect it to any transport.
func NewServer(c *jobs.Client, version string) *sdk.Server {
	s := &server{
		c:         c,
		yield:     envDuration("PI_BASH_YIELD_MS", defaultYield),
		pollChars: envInt("PI_BASH_MAX_OUTPUT_CHARS", envInt("OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", defaultPollChars)),
		backoff:   newBackoff(),
	}
	if version == "" {
		version = "dev"
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "jobs", Title: "jobs: durable background commands", Version: version},
		&sdk.ServerOptions{Instructions: instructions(c.Scope())})
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "execute_command",
		Title:       "Run a shell command",
		Description: executeDescription,
		InputSchema: executeSchema(),
		Annotations: &sdk.ToolAnnotations{Title: "Run a shell command", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.execute)
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "process",
		Title:       "Manage background commands",
		Description: processDescription,
		InputSchema: processSchema(),
		Annotations: &sdk.ToolAnnotations{Title: "Manage background commands", DestructiveHint: ptr(true)},
	}, s.process)
	return srv
}

// Run serves c's scope over MCP on stdin and stdout until the client hangs
// up or ctx ends. A malformed frame is answered with a JSON-RPC error and
// the server reads on.
func Run(ctx context.Context, c *jobs.Client, version string) error {
	t := newStdioTransport(os.Stdin, os.Stdout)
	defer t.close()
	return NewServer(c, version).Run(ctx, t)
}

func instructions(scope string) string {
	return "jobs runs shell commands as durable background jobs (scope " + strconv.Quote(scope) + "). " +
		"Use execute_command to run a command: quick ones return their result, long ones keep running and return a sessionId. " +
		"Use process with that sessionId to poll, read the log, write to stdin, wait, or kill. " +
		"Jobs and their full output survive a restart of this server; output shown to you is cleaned of terminal escapes and bounded, and every result says how to read what it left out."
}

const executeDescription = `Run a shell command (/bin/sh -c) as a durable background job and wait up to yieldMs for it.

- Finished inside the window: you get status, exit_code and the cleaned output (ANSI escapes stripped, progress bars collapsed to their last state; the last 20000 characters at most, with a note on how to read the rest).
- Still running after the window: you get {status: "running", sessionId}. The command keeps running; nothing is lost.

When to background: servers, watchers, builds or test suites that take more than a few seconds, anything interactive. Set background=true to return at once with the sessionId.
How to follow a background job: process action=wait with until (a regex, e.g. "listening on|ERROR") or idle/timeout blocks cheaply (at most 120 s per call) instead of polling in a loop; process action=poll returns only the output that is new since the last poll plus retry_in_ms, a hint for when to poll again; process action=log pages through the full output.
Interactive prompts: process action=write with data (and eof=true to close stdin); poll reports waiting_for_input when the command blocks reading stdin.
tmux=true runs the command in a tmux session (for full-screen or TTY programs); read it with process action=capture and type with action=send_keys.
The command's environment has NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat (unless tmux). timeout (seconds, default 1800, 0 = none) ends the whole process tree.`

const processDescription = `Manage jobs started with execute_command, by sessionId (an id, a unique id prefix, or the job's name).

Actions:
- list: this scope's jobs, newest first: limit of them (default 20, at most 100) and how many more there are. Filters: status (running, done, failed, …, active, finished), name, label, command (each keeps jobs whose field contains the text), since (seconds: created in the last N seconds); cursor (the next_cursor of the previous page) continues.
- poll: status, exit_code, waiting_for_input and the cleaned output that is NEW since the last poll (500 characters at most by default), plus retry_in_ms: how long to wait before polling again; it grows while nothing changes. Prefer wait over repeated polls.
- wait: block until the job finishes, its output matches until (regex), or it has been silent for idle seconds; timeout seconds (default 30, at most 120 per call: call again to keep waiting). Sends progress notifications while waiting.
- log: page through the cleaned full output. offset/limit count lines (offset 0 = first line); default: the last 200 lines; limit at most 2000 lines and 64 KiB per page. unit="bytes" makes offset/limit byte offsets (use next_offset to continue). stream (stdout|stderr) and grep (regex) filter.
- status: all metadata and the transition history.
- write: send data to stdin; eof=true closes stdin after it (data may be empty then).
- send_keys: tmux jobs only; keys are tmux key names (Enter, C-c, Up, …) or, with literal=true, text typed as is.
- capture: tmux jobs only; the screen as clean text, with scrollback lines of history.
- kill: end the whole process tree (SIGTERM, 2 s grace, SIGKILL); with signal (INT, HUP, TERM, KILL, STOP, CONT, USR1, …) send just that signal. Killing a finished job is a no-op.
- pause / resume: stop the job's processes (SIGSTOP) and continue them (SIGCONT); a paused job shows stopped=true.
- clear: drop the stored output (offsets stay absolute).
- remove: delete the job (killing it first if it runs).`

// executeInput is the arguments of execute_command.
type executeInput struct {
	Command     string            `json:"command" jsonschema:"the shell command line, run with /bin/sh -c"`
	Cwd         string            `json:"cwd,omitempty" jsonschema:"working directory (default: the server's)"`
	Env         map[string]string `json:"env,omitempty" jsonschema:"environment variables to add, name to value (values are not stored)"`
	Label       string            `json:"label,omitempty" jsonschema:"free text shown by process action=list"`
	Description string            `json:"description,omitempty" jsonschema:"what the command does, in a few words (used as label when label is empty)"`
	Name        string            `json:"name,omitempty" jsonschema:"a handle unique among running jobs; works wherever a sessionId does"`
	Replace     bool              `json:"replace,omitempty" jsonschema:"end a running job of the same name first"`
	Timeout     *float64          `json:"timeout,omitempty" jsonschema:"maximum runtime in seconds (default 1800; 0 = none); the whole process tree is ended after it"`
	Background  bool              `json:"background,omitempty" jsonschema:"start and return the sessionId at once, without waiting"`
	YieldMs     *int64            `json:"yieldMs,omitempty" jsonschema:"how long to wait for the command to finish before returning its sessionId, in milliseconds (default 10000 or $PI_BASH_YIELD_MS; at most 120000)"`
	Tmux        bool              `json:"tmux,omitempty" jsonschema:"run in a tmux session (for TTY programs; use capture and send_keys)"`
}

// processInput is the arguments of process.
type processInput struct {
	Action     string   `json:"action" jsonschema:"what to do"`
	SessionID  string   `json:"sessionId,omitempty" jsonschema:"the job: id, unique id prefix or name (every action but list)"`
	Offset     *int64   `json:"offset,omitempty" jsonschema:"log: first line to read, from 0 (or byte offset with unit=bytes)"`
	Limit      *int64   `json:"limit,omitempty" jsonschema:"log: how many lines to read (or bytes with unit=bytes); default 200 lines. list: how many sessions (default 20, at most 100)"`
	Unit       string   `json:"unit,omitempty" jsonschema:"log: lines (default) or bytes"`
	Stream     string   `json:"stream,omitempty" jsonschema:"log: stdout or stderr only"`
	Grep       string   `json:"grep,omitempty" jsonschema:"log: keep only lines matching this regular expression"`
	Data       *string  `json:"data,omitempty" jsonschema:"write: text to send to stdin (add \\n to end a line)"`
	EOF        bool     `json:"eof,omitempty" jsonschema:"write: close stdin afterwards"`
	Keys       []string `json:"keys,omitempty" jsonschema:"send_keys: tmux key names such as Enter, C-c, Up, or text with literal=true"`
	Literal    bool     `json:"literal,omitempty" jsonschema:"send_keys: type keys as text instead of key names"`
	Signal     string   `json:"signal,omitempty" jsonschema:"kill: send only this signal (INT, TERM, HUP, KILL, STOP, CONT, USR1, USR2)"`
	Until      string   `json:"until,omitempty" jsonschema:"wait: return when a line of output matches this regular expression"`
	Idle       *float64 `json:"idle,omitempty" jsonschema:"wait: return when output has been silent this many seconds"`
	Timeout    *float64 `json:"timeout,omitempty" jsonschema:"wait: give up after this many seconds (default 30, at most 120)"`
	Scrollback *int64   `json:"scrollback,omitempty" jsonschema:"capture: lines of history above the screen (default 0, at most 2000)"`
	Status     []string `json:"status,omitempty" jsonschema:"list: only sessions in these statuses (running, done, failed, killed, timed_out, lost, starting; active; finished)"`
	Name       string   `json:"name,omitempty" jsonschema:"list: only sessions whose name contains this text"`
	Label      string   `json:"label,omitempty" jsonschema:"list: only sessions whose label contains this text"`
	Command    string   `json:"command,omitempty" jsonschema:"list: only sessions whose command contains this text"`
	Since      *float64 `json:"since,omitempty" jsonschema:"list: only sessions created in the last this many seconds"`
	Cursor     string   `json:"cursor,omitempty" jsonschema:"list: the next_cursor of the previous page"`
}

// actions are process's actions, in the order the description gives them.
var actions = []string{"list", "poll", "log", "status", "write", "send_keys", "capture", "kill", "pause", "resume", "clear", "remove", "wait"}

// executeSchema is executeInput's schema as inferred; the handler checks
// ranges (see processSchema).
func executeSchema() *jsonschema.Schema {
	s, err := jsonschema.For[executeInput](nil)
	if err != nil {
		panic(fmt.Sprintf("execute_command schema: %v", err))
	}
	simplify(s)
	return s
}

func processSchema() *jsonschema.Schema {
	s, err := jsonschema.For[processInput](nil)
	if err != nil {
		panic(fmt.Sprintf("process schema: %v", err))
	}
	simplify(s)
	for _, a := range actions {
		s.Properties["action"].Enum = append(s.Properties["action"].Enum, a)
	}
	s.Properties["unit"].Enum = []any{"lines", "bytes"}
	s.Properties["stream"].Enum = []any{"stdout", "stderr", "pty"}
	// No "minimum" on the numbers: the handlers say "offset must not be
	// negative, got -1", which reads better than the validator's message.
	return s
}

// simplify turns the inferred "type": ["null", "integer"] of optional
// (pointer) fields into plain "type": "integer". Clients that coerce
// command-line or form input by the schema's type (the MCP inspector, for
// one) understand only the plain form; the pointer still tells "absent"
// from 0 on our side.
func simplify(s *jsonschema.Schema) {
	for _, p := range s.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
}

func ptr[T any](v T) *T { return &v }

// envDuration reads a count of milliseconds from the environment.
func envDuration(name string, def time.Duration) time.Duration {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond
	}
	return def
}

// envInt reads a positive count from the environment.
func envInt(name string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n > 0 {
		return n
	}
	return def
}
