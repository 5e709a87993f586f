package jobs

import (
	"encoding/json"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Status is where a job is in its life. A job moves
// starting → running → one of the terminal statuses, and never back. The
// statuses are the engine's own (one vocabulary for every layer).
type Status = vocab.Status

// The eight statuses.
const (
	// StatusQueued means the job waits for its turn (its queue, the
	// scope's running cap, the jobs it comes after); it has no process
	// yet.
	StatusQueued = vocab.StatusQueued
	// StatusStarting means the job row exists and its process is being
	// spawned. A job stays here only for the moment a spawn takes.
	StatusStarting = vocab.StatusStarting
	// StatusRunning means the main process was spawned and has not exited
	// (or its output pipes are still being drained).
	StatusRunning = vocab.StatusRunning
	// StatusDone means the main process exited with status 0.
	StatusDone = vocab.StatusDone
	// StatusFailed means the main process exited non-zero, died of a
	// signal nobody sent through jobs, or could not be started at all
	// (Job.Reason says why).
	StatusFailed = vocab.StatusFailed
	// StatusKilled means a kill verb ended the job.
	StatusKilled = vocab.StatusKilled
	// StatusTimedOut means the job ran past its timeout and was ended.
	StatusTimedOut = vocab.StatusTimedOut
	// StatusLost means the supervisor that owned the job died. Output
	// captured so far stays readable; processes that still run are
	// counted in Job.Descendants and can still be killed.
	StatusLost = vocab.StatusLost
)

// FirstLine is the number of a job's first line of output: line numbers
// count from 1 in every result, option and front end.
const FirstLine = vocab.FirstLine

// Unlimited, as Spec.Timeout, Spec.TTL or Spec.MaxOutput, means none (0
// means the default).
const Unlimited = vocab.Unlimited

// NoGrace, as Kill's grace period, sends SIGKILL right after SIGTERM; 0
// means the client's default.
const NoGrace = vocab.NoGrace

// Mode is how a job's process is attached.
type Mode string

const (
	// ModePipe runs the command with stdin, stdout and stderr on pipes.
	ModePipe Mode = vocab.ModePipe
	// ModeTmux runs the command in its own tmux session; its terminal
	// output is captured as the stream "pty".
	ModeTmux Mode = vocab.ModeTmux
	// ModePTY runs the command in a pseudo-terminal its supervisor owns:
	// programs line-buffer and colour as on a terminal, and its output is
	// the one stream "pty", in the order it was written.
	ModePTY Mode = vocab.ModePTY
)

// Stream names an output stream.
type Stream string

const (
	// Stdout is the job's standard output.
	Stdout Stream = "stdout"
	// Stderr is the job's standard error.
	Stderr Stream = "stderr"
	// PTY is the terminal output of a tmux or pty job.
	PTY Stream = "pty"
)

// Spec describes a job to start. Zero values mean the documented defaults.
type Spec struct {
	// Command is a shell command line, run with Shell -c. Exactly one of
	// Command and Argv is set.
	Command string `json:"command,omitempty"`
	// Shell runs Command: a path or a program name looked up in PATH.
	// Empty means bash when it is installed (agents write bash: [[ ]],
	// pipefail, {1..3}), else /bin/sh. The shell is recorded in the job's
	// Argv.
	Shell string `json:"shell,omitempty"`
	// Argv is a program and its arguments, run directly.
	Argv []string `json:"argv,omitempty"`
	// Name is an optional handle, unique among the scope's active jobs;
	// it works wherever an id does.
	Name string `json:"name,omitempty"`
	// Replace ends a running job of the same name before starting.
	Replace bool `json:"replace,omitempty"`
	// Label is free text shown by list.
	Label string `json:"label,omitempty"`
	// Cwd is the working directory; empty means the caller's.
	Cwd string `json:"cwd,omitempty"`
	// Env holds additions to the environment as KEY=VALUE. Only the
	// names are stored.
	Env []string `json:"env,omitempty"`
	// Timeout is the maximum runtime: 0 means DefaultTimeout, Unlimited
	// (any negative) none (JSON: timeout_ms).
	Timeout time.Duration `json:"-"`
	// TTL is how long a finished job is kept after its last access:
	// 0 means DefaultTTL, Unlimited (any negative) forever (JSON: ttl_ms).
	TTL time.Duration `json:"-"`
	// MaxOutput is how many bytes of output are retained: 0 means
	// DefaultMaxOutput, Unlimited (any negative) no cap.
	MaxOutput int64 `json:"max_output,omitempty"`
	// NoStdin gives the job /dev/null as stdin instead of a pipe.
	NoStdin bool `json:"no_stdin,omitempty"`
	// Color keeps the environment as it is instead of setting
	// NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat.
	Color bool `json:"color,omitempty"`
	// Tmux runs the job in its own tmux session.
	Tmux bool `json:"tmux,omitempty"`
	// KeepTmux leaves a tmux job's session open after the job ends.
	KeepTmux bool `json:"keep_tmux,omitempty"`
	// PTY runs the job in a pseudo-terminal its supervisor owns
	// (ModePTY), of Cols×Rows characters (0: 80×24). Write, SendKeys
	// and Kill work as on a pipe job; end of input is ^D.
	PTY  bool `json:"pty,omitempty"`
	Cols int  `json:"cols,omitempty"`
	Rows int  `json:"rows,omitempty"`
	// Merge gives a pipe job one pipe as both stdout and stderr, so that
	// their lines keep the order the job wrote them in; the output is
	// stored as stream stdout. Without it, stdout and stderr are two
	// pipes, each in its own order, and lines of the two written within
	// a moment of each other may be stored either way round.
	Merge bool `json:"merge,omitempty"`
	// MaxRunningInScope, when set, is this start's cap on the scope's
	// running jobs instead of the client's (Options.MaxRunningPerScope)
	// or the detached supervisor's; the cap over all scopes stays.
	// MaxRunningWithLabel caps the scope's running jobs with this job's
	// Label (a front end's group, such as a session); 0 means none.
	MaxRunningInScope   int `json:"-"`
	MaxRunningWithLabel int `json:"-"`
	// TmuxPrefix starts a tmux job's session name, which the id ends:
	// empty means "jobs-". At most MaxTmuxPrefix characters, letters,
	// digits, '-' and '_'.
	TmuxPrefix string `json:"tmux_prefix,omitempty"`
	// TimeoutGrace is the time between SIGTERM and SIGKILL when Timeout
	// ends the job: 0 means the supervisor's grace (DefaultGrace) (JSON:
	// timeout_grace_ms).
	TimeoutGrace time.Duration `json:"-"`
	// OnExit is a shell command run once when the job reaches a terminal
	// status, with JOBS_ID, JOBS_NAME, JOBS_STATUS, JOBS_EXIT_CODE,
	// JOBS_DURATION_MS and JOBS_OUTPUT_TAIL in its environment. It is
	// run by a supervisor: for a job found lost after its supervisor died,
	// by the next supervisor to start on the database (a read starts none).
	OnExit string `json:"on_exit,omitempty"`

	// Queue makes the job wait (status queued) in this named queue of the
	// scope, which runs its jobs in order, Parallel at a time (see
	// SetQueue; a new queue runs one at a time).
	Queue string `json:"queue,omitempty"`
	// Priority orders the job in its queue: higher starts first.
	Priority int `json:"priority,omitempty"`
	// After lists jobs (ids or names) that must end, whatever their
	// result, before this one starts; AfterOK jobs that must end done,
	// or this one fails with the reason "dependency X failed". The job
	// waits in status queued meanwhile.
	After   []string `json:"after,omitempty"`
	AfterOK []string `json:"after_ok,omitempty"`
	// NoQueue refuses the start with ErrLimit when the scope's running
	// cap is reached, instead of queueing the job until there is room.
	// A start with its own cap (MaxRunningInScope) always refuses: a
	// front end that sets one documents its refusal.
	NoQueue bool `json:"no_queue,omitempty"`

	// restartedFrom is set by Restart.
	restartedFrom string
}

// Defaults for Spec fields left zero.
const (
	DefaultTimeout   = 30 * time.Minute
	DefaultTTL       = 30 * time.Minute
	DefaultMaxOutput = 64 << 20
)

// Job is everything known about a job.
type Job struct {
	// ID is 64 random bits in lower-case base32 (IDLength characters).
	ID string `json:"id"`
	// Scope is the agent or conversation that owns the job.
	Scope string `json:"scope"`
	// Name, when set, works wherever the id does.
	Name string `json:"name,omitempty"`
	// Label is free text for people.
	Label string `json:"label,omitempty"`
	// Command is the command as given: the shell command line, or the
	// argv quoted for a shell.
	Command string `json:"command"`
	// Argv is what was executed: the shell's path, -c and Command, or the
	// argv itself.
	Argv []string `json:"argv"`
	// Cwd is the working directory.
	Cwd string `json:"cwd"`
	// EnvNames are the names of the variables added (never the values).
	EnvNames []string `json:"env_names,omitempty"`
	// Mode is pipe, tmux or pty.
	Mode Mode `json:"mode"`
	// TmuxSession names the tmux session of a tmux job.
	TmuxSession string `json:"tmux_session,omitempty"`
	// Status is where the job is in its life.
	Status Status `json:"status"`
	// ExitCode is the exit status once the main process ended (128+n
	// when signal n ended it); nil before.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the main process ("TERM").
	Signal string `json:"signal,omitempty"`
	// Reason says why the job failed to start, was killed or was lost.
	Reason string `json:"reason,omitempty"`
	// PID and PGID are the main process and its process group.
	PID  int `json:"pid,omitempty"`
	PGID int `json:"pgid,omitempty"`
	// Supervisor is the id of the supervisor that owns the job.
	Supervisor string `json:"supervisor,omitempty"`
	// Host is the host its supervisor ran on. Reads set it when they
	// read several databases at once (see Client.Hosts).
	Host string `json:"host,omitempty"`
	// Stdin is pipe, closed, or null (/dev/null).
	Stdin string `json:"stdin"`
	// OnExit is the command run when the job ends.
	OnExit string `json:"on_exit,omitempty"`
	// CreatedAt, StartedAt and EndedAt are wall-clock times for people;
	// Runtime is the measure of how long it ran.
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// LastAccess is the last read or change: the TTL of a finished job
	// counts from it.
	LastAccess time.Time `json:"last_access_at"`
	// Runtime is how long the job has run (until now, or until it ended).
	// In JSON, like every duration, it is whole milliseconds: runtime_ms.
	Runtime time.Duration `json:"-"`
	// Timeout is the maximum runtime, 0 for none (timeout_ms).
	Timeout time.Duration `json:"-"`
	// TTL is how long the finished job is kept after its last access, 0
	// for forever (ttl_ms).
	TTL time.Duration `json:"-"`
	// MaxOutput is the output cap in bytes; 0 means none.
	MaxOutput int64 `json:"max_output"`
	// OutputBytes is how many bytes the job has written in all.
	OutputBytes int64 `json:"output_bytes"`
	// OutputLines is how many newlines the job has written in all.
	OutputLines int64 `json:"output_lines"`
	// EvictedBytes counts bytes dropped from the middle by the cap or by
	// Clear.
	EvictedBytes int64 `json:"evicted_bytes"`
	// DroppedBytes counts bytes the database could not take.
	DroppedBytes int64      `json:"dropped_bytes"`
	LastOutputAt *time.Time `json:"last_output_at"`
	// ReadCursor is where the next ReadNew starts.
	ReadCursor int64 `json:"read_cursor"`
	// UserCPU and SysCPU are the CPU time the job used, once it ended
	// (user_cpu_ms, sys_cpu_ms).
	UserCPU  time.Duration `json:"-"`
	SysCPU   time.Duration `json:"-"`
	MaxRSSKB int64         `json:"max_rss_kb"`

	// WaitingForInput reports that a process of the job is blocked
	// reading the job's stdin, as the kernel sees it. Live jobs only.
	WaitingForInput bool `json:"waiting_for_input"`
	// Descendants counts processes of the job still alive (its process
	// group and processes carrying its JOBS_ID, proven the job's), once
	// the main process has exited or the job is lost.
	Descendants int `json:"descendants"`
	// MainExited reports that the main process of a running job has
	// exited while other processes of the job (Descendants of them) hold
	// its output open: the job ends when they close it. Live jobs only.
	MainExited bool `json:"main_exited"`
	// Stopped reports that the job's processes are stopped (SIGSTOP, Pause)
	// as the kernel sees them (state T): the main process while it runs,
	// else every process still alive. The status stays what it was.
	Stopped bool `json:"stopped"`

	// Queue is the named queue the job waits or waited in.
	Queue string `json:"queue,omitempty"`
	// QueuePosition is a queued job's place in its queue, 1 for the next
	// to start; 0 when not queued (set by List and Get).
	QueuePosition int `json:"queue_position,omitempty"`
	// RestartedFrom is the job this one repeats (Restart).
	RestartedFrom string `json:"restarted_from,omitempty"`
}

// Event is one row of the audit trail: a status transition or a note.
type Event struct {
	// ID is the cursor: events are numbered in the order they happened.
	ID int64 `json:"id"`
	// JobID is the job's id; the job may have been deleted since.
	JobID string    `json:"job_id"`
	Scope string    `json:"scope"`
	At    time.Time `json:"at"`
	// Kind is transition, output_dropped (output the database could not
	// take), hook (an on_exit command ran) or note.
	Kind string `json:"kind"`
	// From and To are the statuses of a transition (From is empty for the
	// creation).
	From Status `json:"from,omitempty"`
	To   Status `json:"to,omitempty"`
	// Detail is a JSON object: pid, exit code, reason, bytes …
	Detail json.RawMessage `json:"detail,omitempty"`
	// Host is the host of the database the event was read from, set when
	// several databases are read at once (see Client.Hosts).
	Host string `json:"host,omitempty"`
}

// Filter selects jobs for List and ListPage.
type Filter struct {
	// Statuses keeps jobs in any of these statuses; empty keeps all.
	Statuses []Status `json:"statuses,omitempty"`
	// AllScopes lists every scope's jobs instead of the client's.
	AllScopes bool `json:"all_scopes,omitempty"`
	// Since keeps the jobs created at or after this time; zero keeps all.
	Since time.Time `json:"since,omitzero"`
	// Name, Label and Command keep the jobs whose name, label or command
	// contains the text; ASCII letters match either case, every other
	// character (% and _ included) only itself.
	Name    string `json:"name,omitempty"`
	Label   string `json:"label,omitempty"`
	Command string `json:"command,omitempty"`
	// Cursor continues a listing after the page whose Next it is.
	Cursor string `json:"cursor,omitempty"`
	// Limit caps the count (newest first). For List 0 means no cap; for
	// ListPage it means DefaultListLimit.
	Limit int `json:"limit,omitempty"`
}

// Page is one page of a listing, newest first.
type Page struct {
	Jobs []Job `json:"jobs"`
	// More counts the jobs the filter selects after this page, up to
	// MaxMoreCount; MoreAtLeast is set when there are more than that.
	More        int  `json:"more"`
	MoreAtLeast bool `json:"more_at_least,omitempty"`
	// Next is the cursor of the following page; "" on the last one.
	Next string `json:"next_cursor,omitempty"`
}

// Listing defaults. Counting every job a long history holds would cost
// as much as the history; a page counts the rest only up to MaxMoreCount.
const (
	DefaultListLimit = 50
	MaxMoreCount     = 1000
)

// Range selects part of a job's output for Log. Set at most one of the
// three selections: a byte range (Offset/Limit), a line range
// (FromLine/Lines) or a tail (Tail, TailLines). With none set, Log returns
// the last DefaultTailChars characters.
type Range struct {
	// Offset is the absolute byte offset to start at (with Limit).
	Offset int64 `json:"offset,omitempty"`
	// Limit is the number of bytes to read from Offset; 0 with Offset set
	// means DefaultPageBytes.
	Limit int64 `json:"limit,omitempty"`
	// FromLine is the first line to read, counted from 1.
	FromLine int64 `json:"from_line,omitempty"`
	// Lines is how many lines to read from FromLine.
	Lines int64 `json:"lines,omitempty"`
	// Tail is the number of characters to read from the end.
	Tail int64 `json:"tail,omitempty"`
	// TailLines is the number of lines to read from the end.
	TailLines int64 `json:"tail_lines,omitempty"`
	// Stream keeps one stream only; empty keeps all.
	Stream Stream `json:"stream,omitempty"`
	// Grep keeps only lines matching this regular expression.
	Grep string `json:"grep,omitempty"`
	// Clean strips escape sequences and collapses carriage-return
	// overwrites (text for agents).
	Clean bool `json:"clean,omitempty"`
	// ByteRange marks Offset/Limit as the selection even when both are 0.
	ByteRange bool `json:"-"`
}

// Read defaults.
const (
	DefaultTailChars = 500
	DefaultLogLines  = 200
	DefaultPageBytes = 64 << 10
	MaxPageBytes     = 16 << 20
)

// Output is a page of a job's output and what it left out.
type Output struct {
	JobID string `json:"id"`
	// Text is the output: raw bytes as a string, or cleaned text.
	Text string `json:"output"`
	// Start and End are the absolute byte offsets covered, [Start, End).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// NextOffset is where to continue reading.
	NextOffset int64 `json:"next_offset"`
	// FirstLine is the first line covered (from 1); Lines how many.
	FirstLine int64 `json:"first_line"`
	Lines     int64 `json:"lines"`
	// TotalBytes and TotalLines are the job's whole output so far.
	TotalBytes int64 `json:"total_bytes"`
	TotalLines int64 `json:"total_lines"`
	// OmittedBefore and OmittedAfter count bytes of the job's output
	// that are outside this page.
	OmittedBefore int64 `json:"omitted_before"`
	OmittedAfter  int64 `json:"omitted_after"`
	// Evicted counts bytes inside this page's range that are not stored:
	// removed by the output cap or a clear, or dropped on a full disk.
	// EvictedTotal counts the bytes the cap or a clear removed from the
	// whole job, DroppedTotal those a full disk dropped; a front end names
	// the gap after whichever of the two it can be.
	Evicted      int64 `json:"evicted"`
	EvictedTotal int64 `json:"evicted_total"`
	DroppedTotal int64 `json:"dropped_total"`
	// CutLines counts lines longer than MaxGrepLine that a grep examined
	// and returned only in part (Truncated is set then).
	CutLines int64 `json:"cut_lines,omitempty"`
	// Truncated reports that a limit cut this read short.
	Truncated bool `json:"truncated"`
	// Skipped counts new bytes a ReadNew with PollOptions.Newest passed
	// over to give the newest part; they start at SkippedFrom.
	Skipped     int64 `json:"skipped,omitempty"`
	SkippedFrom int64 `json:"skipped_from,omitempty"`
}

// PollResult is a job's state plus a cleaned piece of its output.
type PollResult struct {
	Job    Job    `json:"job"`
	Output Output `json:"output"`
	// RetryIn suggests when to poll next: it grows while nothing changes
	// (retry_in_ms).
	RetryIn time.Duration `json:"-"`
}

// PollOptions shapes Poll and ReadNew.
type PollOptions struct {
	// Tail is how many characters of output to return (default
	// DefaultTailChars).
	Tail int64
	// Grep keeps only matching lines (ReadNew).
	Grep string
	// Raw returns bytes as they are instead of cleaned text.
	Raw bool
	// Newest makes ReadNew, when more is new than Tail characters, return
	// the newest part, starting at a line, and skip the older rest
	// (Output.Skipped counts it; the log keeps it). Without it ReadNew
	// returns the oldest part and the next call continues there.
	Newest bool
}

// KillResult says what a kill did.
type KillResult = vocab.KillResult

// WaitOptions shapes Wait.
type WaitOptions struct {
	// Any returns when the first job finishes instead of all of them.
	Any bool
	// Timeout bounds the wait; 0 means none (the context still applies).
	Timeout time.Duration
	// Until returns when the output of a job matches this regular
	// expression, tested line by line (the pending partial line
	// included).
	Until string
	// Clean tests Until against each line as cleaned text shows it
	// (escapes stripped, carriage-return overwrites collapsed: what poll
	// and an agent read), and Match is that text. Otherwise Until is
	// tested against the raw bytes.
	Clean bool
	// Idle returns when no job has produced output for this long.
	Idle time.Duration
	// Input returns when a job is blocked reading its stdin (a prompt
	// waits for an answer), with what it wrote before blocking stored.
	Input bool
	// NewOutput returns when a job has output its ReadNew cursor has not
	// passed (a blocking poll).
	NewOutput bool
	// Progress, when set, is called about once a second while waiting.
	Progress func([]Job)
}

// WaitReason says why Wait returned.
type WaitReason string

const (
	// WaitExited means the awaited jobs finished.
	WaitExited WaitReason = "exited"
	// WaitMatched means output matched WaitOptions.Until.
	WaitMatched WaitReason = "matched"
	// WaitIdle means output was silent for WaitOptions.Idle.
	WaitIdle WaitReason = "idle"
	// WaitTimedOut means WaitOptions.Timeout passed first.
	WaitTimedOut WaitReason = "timeout"
	// WaitInput means a job is blocked reading its stdin
	// (WaitOptions.Input).
	WaitInput WaitReason = "input"
	// WaitOutput means a job has output not yet read by ReadNew
	// (WaitOptions.NewOutput).
	WaitOutput WaitReason = "output"
)

// WaitResult says why Wait returned and the jobs' states then.
type WaitResult struct {
	Reason WaitReason `json:"reason"`
	// Jobs are the awaited jobs, in the order asked.
	Jobs []Job `json:"jobs"`
	// JobID is the job that ended the wait (Any, Until, Idle, Input).
	JobID string `json:"id,omitempty"`
	// Match is the matching line for WaitMatched.
	Match string `json:"match,omitempty"`
}

// IDLength is the length of a job id: 64 random bits in lower-case base32.
const IDLength = 13
