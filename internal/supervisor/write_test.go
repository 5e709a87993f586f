package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/internal/vocab"
)

// A write to a job that does not read gives up after its idle bound with
// the count taken; a writer queued behind a blocked one gives up with its
// own bound; eof closes the pipe under a write that has no bound.
func TestWriteNotReading(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	ctx := context.Background()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	const idle = 200 * time.Millisecond
	big := make([]byte, 4<<20)
	n, err := s.Write(ctx, job.ID, big, false, idle)
	if !errors.Is(err, vocab.ErrNotReading) {
		t.Fatalf("write to a job that does not read: %v, want vocab.ErrNotReading", err)
	}
	if n <= 0 || n >= len(big) {
		t.Errorf("took %d of %d bytes, want the pipe's worth", n, len(big))
	}

	blocked := make(chan error, 1)
	go func() {
		_, err := s.Write(ctx, job.ID, big, false, 0)
		blocked <- err
	}()
	// Once the unbounded write holds the writers' turn, a bounded one
	// queued behind it gives up after its own bound.
	c := s.runners.child(job.ID)
	deadline := time.Now().Add(testwait.Least)
	for len(c.stdinTurn) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unbounded write never took its turn")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.Write(ctx, job.ID, []byte("x"), false, idle); !errors.Is(err, vocab.ErrNotReading) || !strings.Contains(err.Error(), "another write") {
		t.Fatalf("write queued behind a blocked one: %v, want vocab.ErrNotReading", err)
	}
	if _, err := s.Write(ctx, job.ID, nil, true, 0); err != nil {
		t.Fatalf("eof while a write is blocked: %v", err)
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, vocab.ErrStdinClosed) {
			t.Errorf("the blocked write ended with %v, want vocab.ErrStdinClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked write did not end when stdin was closed")
	}
	if _, err := s.Kill(ctx, job.ID, 0); err != nil {
		t.Fatal(err)
	}
}
