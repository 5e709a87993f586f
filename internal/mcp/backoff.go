package mcp

import (
	"sync"
	"time"
)

// backoffSteps is the retry_in_ms poll suggests after 0, 1, 2 … polls in a
// row that saw no change; the last step repeats.
var backoffSteps = []time.Duration{
	1 * time.Second,
	2 * time.Second,
	5 * time.Second,
	10 * time.Second,
	30 * time.Second,
	60 * time.Second,
}

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
	end    int64  // total output bytes at the last poll
	status string // status at the last poll
	misses int    // polls in a row without a change
	seen   time.Time
}

func newBackoff() *backoff { return &backoff{jobs: make(map[string]*pollState)} }

// observe records a poll of job id that saw total output bytes and status
// and returns the suggested wait before the next poll, or 0 once the job is
// finished (there is nothing more to wait for).
func (b *backoff) observe(id string, total int64, status string, terminal bool) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.jobs[id]
	switch {
	case !ok:
		b.prune()
		st = &pollState{}
		b.jobs[id] = st
	case st.end == total && st.status == status:
		st.misses++
	default:
		st.misses = 0
	}
	st.end, st.status, st.seen = total, status, time.Now()
	if terminal {
		return 0
	}
	return backoffSteps[min(st.misses, len(backoffSteps)-1)]
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
