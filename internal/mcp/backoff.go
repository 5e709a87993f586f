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
	misses int    // polls in a row without a change of state
	seen   time.Time
}

func newBackoff() *backoff { return &backoff{jobs: make(map[string]*pollState)} }

// observe records a poll of job id that saw state (its status and what the
// kernel says of it), quiet for quiet (since its last output, else since it
// started), and returns the suggested wait before the next poll
// (vocab.RetryIn, one step further for each poll in a row that saw no
// change), or 0 once the job is finished. New output is not a
// change: a chatty job would otherwise be polled every second for its
// whole life, and wait serves an agent that wants to see it end.
func (b *backoff) observe(id, state string, quiet time.Duration, terminal bool) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.jobs[id]
	switch {
	case !ok:
		b.prune()
		st = &pollState{}
		b.jobs[id] = st
	case st.state == state:
		st.misses++
	default:
		st.misses = 0
	}
	st.state, st.seen = state, time.Now()
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
