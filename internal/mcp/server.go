package mcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits that keep every call short and every result small.
const (
	// defaultBound is how long one call may block (execute_command's
	// yield window, process wait, a blocking poll): below the 60 s after
	// which common clients (the MCP inspector, the TypeScript SDK) give up
	// on a request. A call that reaches it returns the session's status
	// and says to call wait again. EnvCallBound lowers or raises it.
	defaultBound = 50 * time.Second
	// maxBound caps EnvCallBound.
	maxBound = 120 * time.Second
	// defaultYield is execute_command's window when neither yieldMs nor
	// PI_BASH_YIELD_MS says otherwise.
	defaultYield = 10 * time.Second
	// defaultPollChars is poll's output budget (the original interfaces' 500 characters).
	defaultPollChars = jobs.DefaultTailChars
	// resultChars bounds the output tail of a finished command's result
	// (execute_command, wait); waitChars the tail wait shows of a job that
	// still runs or of each of several jobs.
	resultChars = 20000
	waitChars   = 2000
	// defaultLogLines and maxLogLines bound a log page in lines;
	// maxPageChars bounds it in characters whatever the unit.
	defaultLogLines = 200
	maxLogLines     = 2000
	maxPageChars    = 64 << 10
	// defaultListJobs and maxListJobs bound list: the documents' list
	// shows all sessions, so the default is the bound.
	defaultListJobs = 100
	maxListJobs     = 100
	// maxWaitJobs bounds the sessions one wait watches.
	maxWaitJobs = 50
	// maxWriteBytes bounds one write to stdin.
	maxWriteBytes = 16 << 20
	// maxCaptureLines bounds capture's scrollback.
	maxCaptureLines = 2000
)

// EnvCallBound sets, in milliseconds, how long one tool call may block
// (default 50000, at most 120000). Lower it when a client gives up sooner;
// tests lower it to see a long job cross the bound quickly.
const EnvCallBound = "JOBS_MCP_CALL_BOUND_MS"

// server holds what the tools share: the client and the poll back-off.
type server struct {
	c         *jobs.Client
	bound     time.Duration
	yield     time.Duration
	pollChars int64
	// ttl is how long a finished job is kept after its last access
	// ($PI_BASH_JOB_TTL_MS, as the CLI reads it): 0 leaves the engine's
	// default (30 min, the original interfaces' cleanupMs), negative keeps it for ever.
	ttl     time.Duration
	backoff *backoff
	// off is OpenClaw's offloaded output (nil in the other profiles).
	off *offload
	// notices tells the server's clients of job ends (notices.go).
	notices *notifier
	// files mirrors the duragent profile's processes to its
	// .duragent/processes files (duragent_files.go); nil in the other
	// profiles.
	files *duragentFiles
	// work is what the profile's tools keep doing while the server
	// serves; Run runs each in a goroutine of its own and stops it.
	work []func(ctx context.Context)
}

// close stops what the tools left running (the offloaded files' upkeep).
func (s *server) close() {
	if s.off != nil {
		s.off.close()
	}
}

// NewServer returns an MCP server whose tools act on c's scope, with the
// default profile's tools. Run serves it on stdio; tests connect it to any
// transport.
func NewServer(c *jobs.Client, version string) *sdk.Server {
	srv, err := NewProfileServer(c, version, DefaultProfile)
	if err != nil {
		panic(fmt.Sprintf("default profile: %v", err))
	}
	return srv
}

// newState is what every profile's tools share.
func newState(c *jobs.Client) *server {
	s := &server{
		c:         c,
		bound:     min(envDuration(EnvCallBound, defaultBound), maxBound),
		yield:     envDuration("PI_BASH_YIELD_MS", defaultYield),
		pollChars: envInt("PI_BASH_MAX_OUTPUT_CHARS", envInt("OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", defaultPollChars)),
		backoff:   newBackoff(),
	}
	if v := os.Getenv("PI_BASH_JOB_TTL_MS"); v != "" {
		if d := envDuration("PI_BASH_JOB_TTL_MS", -2); d == 0 {
			s.ttl = -1 // 0 keeps finished jobs for ever, as for the CLI
		} else if d > 0 {
			s.ttl = d
		}
	}
	if s.bound <= 0 {
		s.bound = defaultBound
	}
	return s
}

// addOpenClaw adds OpenClaw's tools: execute_command and process (every
// action of the documents, kill, clear and remove included), with
// kill_process serving those three alone.
func addOpenClaw(s *server, srv *sdk.Server) {
	s.off = newOffload(s.c)
	sdk.AddTool(srv, &sdk.Tool{
		Name:         "execute_command",
		Title:        "Run a shell command",
		Description:  executeDescription(s.bound),
		InputSchema:  executeSchema(),
		OutputSchema: outputSchema("status", "sessionId"),
		Annotations:  &sdk.ToolAnnotations{Title: "Run a shell command", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.execute)
	// process is the documents' tool, kill, clear and remove included
	// (their integration test is execute_command, then process poll, then
	// process kill), so it is marked as one that may destroy. kill_process
	// serves the same three actions alone, for clients that ask before
	// every destructive call and would rather not for each poll.
	sdk.AddTool(srv, &sdk.Tool{
		Name:         "process",
		Title:        "Follow, talk to and end background commands",
		Description:  processDescription(s.bound),
		InputSchema:  processSchema(),
		OutputSchema: outputSchema(),
		Annotations:  &sdk.ToolAnnotations{Title: "Follow, talk to and end background commands", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.process)
	sdk.AddTool(srv, &sdk.Tool{
		Name:         "kill_process",
		Title:        "End or delete a background command",
		Description:  killDescription,
		InputSchema:  killSchema(),
		OutputSchema: outputSchema("sessionId"),
		Annotations:  &sdk.ToolAnnotations{Title: "End or delete a background command", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.killTool)
}

// Run serves c's scope over MCP on stdin and stdout, with profile's tools, until the client hangs
// up or ctx ends. A malformed frame is answered with a JSON-RPC error and
// the server reads on.
func Run(ctx context.Context, c *jobs.Client, version, profile string) error {
	return serve(ctx, c, version, profile, os.Stdin, false)
}

// RunOwnScope is Run for a server that was given no scope (no --scope,
// no JOBS_SCOPE). Under a profile whose documents isolate sessions per
// conversation (openclaw) it serves the conversation its client names in
// initialize (params._meta.conversationId), else a scope of its own for
// the connection (see scope.go); under the others it serves c's scope, as
// Run does.
func RunOwnScope(ctx context.Context, c *jobs.Client, version, profile string) error {
	return serve(ctx, c, version, profile, os.Stdin, true)
}

func serve(ctx context.Context, c *jobs.Client, version, profile string, stdin io.Reader, own bool) error {
	if profile == "" {
		profile = DefaultProfile
	}
	in := stdin
	if p, ok := profiles[profile]; ok && own && p.isolate {
		// The scope comes from the client's first message, so the server
		// (its tools, resources and notices all act on one client) is
		// made after it is read; the server then reads it again.
		br := bufio.NewReaderSize(stdin, 64<<10)
		first, err := peekFrame(ctx, br)
		if err != nil {
			return err
		}
		sc, err := c.WithScope(ctx, scopeFor(first))
		if err != nil {
			return err
		}
		defer sc.Close()
		c = sc
		in = io.MultiReader(bytes.NewReader(first), br)
	}
	// Ends from the server's start on are announced live; any end no
	// client received is told when a client sets its logging level.
	srv, n, s, err := newProfileState(c, version, profile, time.Now())
	if err != nil {
		return err
	}
	defer s.close()
	t := newStdioTransport(in, os.Stdout)
	defer t.close()
	// announce tells this server's clients of status changes while it
	// serves; it ends with the server.
	nctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, work := range append([]func(context.Context){n.announce}, s.work...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(nctx)
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	return srv.Run(ctx, t)
}

func instructions(scope string) string {
	return "jobs runs shell commands as durable background jobs (scope " + strconv.Quote(scope) + "). " +
		"Use execute_command to run a command: quick ones return their result, long ones keep running and return a sessionId. " +
		"Use process with that sessionId to wait, poll, read the log, write to stdin or type keys, and to kill, clear or remove it (kill_process does those three alone). " +
		"No call blocks past its bound (under a minute): one that reaches it says so, and wait picks up where it left off. " +
		"Jobs and their full output survive a restart of this server; output shown to you is cleaned of terminal escapes and bounded, and every result says how to read what it left out."
}

func executeDescription(bound time.Duration) string {
	return `Run a shell command line (bash -c) as a durable background job and wait up to yieldMs for it.
Finished in time: its status and cleaned output (escapes stripped; the last 20000 characters, with a note on reading the rest). At a prompt on stdin: returns with waiting_for_input (answer with process write). Still running: returns its sessionId; it keeps running.
No call blocks more than ` + round(bound) + `. background=true returns at once (servers, watchers, long builds); follow with process wait rather than polling.
pty=true runs it in a terminal: output shows as written (no block buffering), colour and prompts as on a terminal. tmux=true: a tmux session (send_keys, capture).
Environment: NO_COLOR=1 TERM=dumb PAGER=cat (unless pty or tmux). timeout in ms (default 30 minutes, 0 = none) ends the whole tree. Output past 10 KB is also in outputFilePath.`
}

func processDescription(bound time.Duration) string {
	return `Act on jobs started with execute_command, by sessionId (id, unique prefix or name).
- wait: block until the job ends, waits for input, its output matches until (regex) or is silent idle seconds; several sessionIds: the first to end (all=true: all). Returns the unread output. At most ` + round(bound) + ` a call; call again to go on.
- poll: status, exitCode, waiting_for_input, the last 500 characters and new_output since the last poll; retry_in_ms says when to look again.
- log: page the cleaned output: offset/limit in characters (unit lines or bytes); without offset, the tail.
- list: this scope's jobs, newest first; filter by status, name, label, command, since; cursor pages.
- status: metadata and history.
- write: data to stdin ("\n" ends a line); eof=true closes it (^D in a pty).
- send_keys: tmux and pty jobs; key names (Enter, C-c, Up) are pressed, other keys typed; literal=true types all.
- capture: a tmux job's screen.
- kill: end the whole tree (TERM, 2 s, KILL); signal sends only that signal.
- clear: drop the stored output. remove: delete the job (killing it first).
- pause / resume: SIGSTOP / SIGCONT the job.
- restart: a new job with the same command and settings; restarted_from names the old.
Output past 10 KB is also in a file: offloaded=true, outputFilePath (read it with your file tools).`
}

const killDescription = `End or delete a job started with execute_command, by sessionId. action=kill (default) ends the whole tree (TERM, 2 s, KILL), or sends only signal; clear drops its stored output; remove deletes it, killing it first.`

// executeInput is the arguments of execute_command.
type executeInput struct {
	Command         string            `json:"command" jsonschema:"the shell command line"`
	Shell           string            `json:"shell,omitempty" jsonschema:"the shell that runs it (default bash)"`
	Cwd             string            `json:"cwd,omitempty" jsonschema:"working directory"`
	Env             map[string]string `json:"env,omitempty" jsonschema:"variables to add (values not stored)"`
	Label           string            `json:"label,omitempty" jsonschema:"free text shown by list"`
	Description     string            `json:"description,omitempty" jsonschema:"what it does, 5 to 100 characters"`
	Name            string            `json:"name,omitempty" jsonschema:"a handle, usable as sessionId"`
	Replace         bool              `json:"replace,omitempty" jsonschema:"end a running job of that name first"`
	Timeout         *float64          `json:"timeout,omitempty" jsonschema:"maximum runtime in ms, at least 100 (0 = none)"`
	Background      bool              `json:"background,omitempty" jsonschema:"return the sessionId at once"`
	RunInBackground bool              `json:"run_in_background,omitempty" jsonschema:"same as background"`
	YieldMs         *count            `json:"yieldMs,omitempty" jsonschema:"ms to wait before returning the sessionId (default 10000)"`
	Tmux            bool              `json:"tmux,omitempty" jsonschema:"run in a tmux session"`
	PTY             bool              `json:"pty,omitempty" jsonschema:"run in a terminal"`
	Merge           bool              `json:"merge,omitempty" jsonschema:"stdout and stderr as one stream, in order"`
	Queue           string            `json:"queue,omitempty" jsonschema:"a named queue to wait in (runs its jobs in order)"`
	After           []string          `json:"after,omitempty" jsonschema:"start once these sessions have ended"`
	AfterOK         []string          `json:"after_ok,omitempty" jsonschema:"start once these sessions succeeded (else fail)"`
}

// processInput is the arguments of process.
type processInput struct {
	Action     string   `json:"action" jsonschema:"what to do"`
	SessionID  string   `json:"sessionId,omitempty" jsonschema:"the job (all but list)"`
	SessionIDs []string `json:"sessionIds,omitempty" jsonschema:"wait: several jobs"`
	All        bool     `json:"all,omitempty" jsonschema:"wait: until all have ended"`
	Status     string   `json:"status,omitempty" jsonschema:"list: running, done, error, killed, active or finished (commas for several)"`
	Offset     *count   `json:"offset,omitempty" jsonschema:"log: first unit to read, from 0 (default: the tail)"`
	Limit      *count   `json:"limit,omitempty" jsonschema:"log: units to read (default 20000 chars); list: jobs (at most 100)"`
	Unit       string   `json:"unit,omitempty" jsonschema:"log: chars, lines or bytes"`
	Stream     string   `json:"stream,omitempty" jsonschema:"log: one stream only"`
	Grep       string   `json:"grep,omitempty" jsonschema:"log, poll: only lines matching this regex"`
	Filter     string   `json:"filter,omitempty" jsonschema:"same as grep"`
	Data       *string  `json:"data,omitempty" jsonschema:"write: text for stdin"`
	EOF        bool     `json:"eof,omitempty" jsonschema:"write: then close stdin"`
	Keys       []string `json:"keys,omitempty" jsonschema:"send_keys: keys to press or text to type"`
	Literal    bool     `json:"literal,omitempty" jsonschema:"send_keys: type all as text"`
	Until      string   `json:"until,omitempty" jsonschema:"wait: until a line matches this regex"`
	Idle       *float64 `json:"idle,omitempty" jsonschema:"wait: until silent this many seconds"`
	Timeout    *float64 `json:"timeout,omitempty" jsonschema:"wait, poll: seconds to block at most"`
	Scrollback *count   `json:"scrollback,omitempty" jsonschema:"capture: lines of history too"`
	Name       string   `json:"name,omitempty" jsonschema:"list: name contains"`
	Label      string   `json:"label,omitempty" jsonschema:"list: label contains"`
	Command    string   `json:"command,omitempty" jsonschema:"list: command contains"`
	Since      *float64 `json:"since,omitempty" jsonschema:"list: created in the last seconds"`
	Cursor     string   `json:"cursor,omitempty" jsonschema:"list: next_cursor of the last page"`
	Signal     string   `json:"signal,omitempty" jsonschema:"kill: send only this signal (INT, TERM, HUP …)"`
}

// killInput is the arguments of kill_process.
type killInput struct {
	Action    string `json:"action,omitempty" jsonschema:"kill, clear or remove"`
	SessionID string `json:"sessionId" jsonschema:"the job"`
	Signal    string `json:"signal,omitempty" jsonschema:"send only this signal"`
}

// actionParams is an action and the parameters it takes.
type actionParams struct {
	name   string
	params []string
}

// actions are process's actions and the parameters each takes, in the
// order the description gives them.
var actions = []actionParams{
	{"wait", []string{"sessionId", "sessionIds", "all", "until", "idle", "timeout"}},
	{"poll", []string{"sessionId", "timeout", "grep", "filter"}},
	{"log", []string{"sessionId", "offset", "limit", "unit", "stream", "grep", "filter"}},
	{"list", []string{"status", "limit", "name", "label", "command", "since", "cursor"}},
	{"status", []string{"sessionId"}},
	{"write", []string{"sessionId", "data", "eof"}},
	{"send_keys", []string{"sessionId", "keys", "literal"}},
	{"capture", []string{"sessionId", "scrollback"}},
	{"kill", []string{"sessionId", "signal"}},
	{"clear", []string{"sessionId"}},
	{"remove", []string{"sessionId"}},
	{"pause", []string{"sessionId"}},
	{"resume", []string{"sessionId"}},
	{"restart", []string{"sessionId"}},
}

// killActions are kill_process's actions and their parameters.
var killActions = []actionParams{
	{"kill", []string{"sessionId", "signal"}},
	{"clear", []string{"sessionId"}},
	{"remove", []string{"sessionId"}},
}

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
		s.Properties["action"].Enum = append(s.Properties["action"].Enum, a.name)
	}
	s.Properties["unit"].Enum = []any{"chars", "lines", "bytes"}
	s.Properties["stream"].Enum = []any{"stdout", "stderr", "pty"}
	// No "minimum" on the numbers: the handlers say "offset must not be
	// negative, got -1", which reads better than the validator's message.
	return s
}

func killSchema() *jsonschema.Schema {
	s, err := jsonschema.For[killInput](nil)
	if err != nil {
		panic(fmt.Sprintf("kill_process schema: %v", err))
	}
	simplify(s)
	s.Properties["action"].Enum = []any{"kill", "clear", "remove"}
	return s
}

// outputSchema declares a tool's structured result: an object, with the
// named string properties always present. The fields differ by action;
// docs/json.md lists them.
func outputSchema(required ...string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	for _, name := range required {
		s.Properties[name] = &jsonschema.Schema{Type: "string"}
	}
	s.Required = required
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
