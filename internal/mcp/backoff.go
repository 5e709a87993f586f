package mcp

import (
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// maxBackoffEntries bounds the per-job state kept; the oldest entries go
// first. A forgotten entry only resets its job's hint to the first step.
const maxBackoffEntries = 1024

// backoff remembers, per job, what the last poll saw, so that the next
// poll can tell whether anything changed and suggest when to come back.
type backoff struct {
	mu   sync.Mutex
	jobs map[string]*pollState
}

type pollState struct {
	state  string // status, input, stopped … at the last poll
	output int64  // the job's output bytes at the last poll
	misses int    // polls in a row without a change of state or new output
	seen   time.Time
}

func newBackoff() *backoff { return &backoff{jobs: make(map[string]*pollState)} }

// observe records a poll of job id that saw state (its status and what the
// kernel says of it) and output bytes in all, quiet for quiet (since its
// last output, else since it started), and returns the suggested wait
// before the next poll (vocab.RetryIn, one step further for each poll in a
// row that saw no change and no new output), or 0 once the job is
// finished. The hint backs off only on silence: while output flows, an
// agent that reads it as it comes is told to come back soon, not in 30 s.
func (b *backoff) observe(id, state string, output int64, quiet time.Duration, terminal bool) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.jobs[id]
	switch {
	case !ok:
		b.prune()
		st = &pollState{}
		b.jobs[id] = st
	case st.state == state && st.output == output:
		st.misses++
	default:
		st.misses = 0
	}
	st.state, st.output, st.seen = state, output, time.Now()
	return vocab.RetryIn(terminal, quiet, st.misses)
}

// reset forgets job id (after remove, or when something else changed it).
func (b *backoff) reset(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.jobs, id)
}

// prune drops the least recently polled entry when the map is full. The
// caller holds mu.
func (b *backoff) prune() {
	if len(b.jobs) < maxBackoffEntries {
		return
	}
	var oldest string
	var at time.Time
	for id, st := range b.jobs {
		if oldest == "" || st.seen.Before(at) {
			oldest, at = id, st.seen
		}
	}
	delete(b.jobs, oldest)
}
