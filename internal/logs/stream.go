package logs

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Stream names the pipe a chunk was read from.
type Stream string

const (
	// Stdout is the child's standard output.
	Stdout Stream = "stdout"
	// Stderr is the child's standard error.
	Stderr Stream = "stderr"
	// PTY is the terminal of a tmux job, where both streams are one.
	PTY Stream = "pty"
)

// Valid reports whether s is one of the streams the schema accepts.
func (s Stream) Valid() bool {
	switch s {
	case Stdout, Stderr, PTY:
		return true
	}
	return false
}

// Unit is what [Tail] counts.
type Unit int

const (
	// Bytes counts bytes.
	Bytes Unit = iota
	// Chars counts UTF-8 characters; each byte of an invalid sequence counts
	// as one character.
	Chars
)

// Defaults and bounds.
const (
	// DefaultFlushInterval is the spacing of the flushes' grid: written
	// bytes wait at most this long for their flush, and a reader that reads
	// just before each flush (see [Appender.NextFlush]) makes a trickle
	// visible within about this (DESIGN: ~100 ms). Flushes of 100 jobs
	// trickling a few lines each are the bulk of a supervisor's CPU, so
	// the interval is as long as that promise allows.
	DefaultFlushInterval = 90 * time.Millisecond
	// DefaultMaxBatchBytes flushes at once when this many bytes wait.
	DefaultMaxBatchBytes = 4 << 20
	// DefaultMaxChunk is the largest chunk row, which a flood fills (and
	// codec.go compresses as one zstd frame). Rows of 256 KiB were tried:
	// a flood of text compressed no faster (8.3 times smaller against
	// 8.0), and eight jobs flooding both streams took the supervisor's
	// peak RSS from about 69 to 88 MiB (a partly filled chunk per
	// stream, and each larger).
	DefaultMaxChunk = 64 << 10
	// DefaultHeadKeep is how much of the start of a capped job's output is
	// never evicted.
	DefaultHeadKeep = 1 << 20
	// DefaultBusyTimeout bounds one flush's wait for the write lock before
	// its batch goes to the spool. A child's write waits at most about
	// this long while the database is locked (once MaxPendingBytes wait),
	// so it is well under the second a write may stall.
	DefaultBusyTimeout = 300 * time.Millisecond
	// DefaultRetryFor is how long a failing flush is retried before its
	// bytes are dropped.
	DefaultRetryFor = 3 * time.Second
	// DefaultMinFree is the free space the flusher leaves on the database's
	// file system for the writes that record what happens to jobs.
	DefaultMinFree = 2 << 20

	// DefaultLimit is the read limit when a read passes 0.
	DefaultLimit = 64 << 10
	// MaxLimit is the largest page a read returns.
	MaxLimit = 16 << 20
	// ScanLimit is the most output a filtered read (stream or regex)
	// examines before it returns what it found.
	ScanLimit = 64 << 20
)

var (
	// ErrJobNotFound is returned when the jobs row does not exist. It is
	// also vocab.ErrNotFound.
	ErrJobNotFound = fmt.Errorf("job %w", vocab.ErrNotFound)
	// ErrNotTracked is returned by Write for a job the appender does not
	// track.
	ErrNotTracked = errors.New("job not tracked")
	// ErrClosed is returned by Write and Track after Close.
	ErrClosed = errors.New("appender closed")
)
