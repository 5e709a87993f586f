package vocab

// The modes a job runs in: how its output reaches the supervisor. The
// schema's CHECK constraint holds the same words. They are untyped, as the
// job rows and requests that carry them are plain strings.
const (
	// ModePipe: stdout and stderr are pipes (or one pipe, merged).
	ModePipe = "pipe"
	// ModeTmux: the job runs in a tmux session; a helper tmux runs stores
	// the pane's output.
	ModeTmux = "tmux"
	// ModePTY: the job runs in a pseudo-terminal its supervisor owns.
	ModePTY = "pty"
)

// The states of a job's stdin, as the schema holds them.
const (
	// StdinPipe: open; writes reach the job.
	StdinPipe = "pipe"
	// StdinClosed: the job was sent end of file.
	StdinClosed = "closed"
	// StdinNull: /dev/null from the start.
	StdinNull = "null"
)

// DefaultScope is the scope of a caller that names none.
const DefaultScope = "default"
