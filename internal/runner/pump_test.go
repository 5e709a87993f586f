package runner

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

func TestReadPause(t *testing.T) {
	for _, c := range []struct {
		n     int
		since time.Duration
		want  time.Duration
	}{
		{0, time.Second, 0},                                                // nothing read: read again at once
		{64 << 10, 100 * time.Microsecond, 0},                              // a flood: no pause
		{13, 10 * time.Millisecond, 10 * time.Millisecond * pipeHalf / 13}, // a line every 10 ms
		{pipeHalf / 2, 20 * time.Millisecond, 40 * time.Millisecond},       // a quarter of a pipe in 20 ms
		{pipeHalf, time.Second, 0},                                         // the pipe may have been full
	} {
		if got := readPause(c.n, c.since); got != c.want {
			t.Errorf("readPause(%d, %s) = %s, want %s", c.n, c.since, got, c.want)
		}
	}
}

// A grandchild that goes on trickling into the pipes after the main process
// exited keeps the pump reading without ever waiting in the netpoller; the
// drain deadline must still end the job, with the output so far kept.
func TestTricklingGrandchildDoesNotHoldJob(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{DrainTimeout: 300 * time.Millisecond})
	job := start(t, s, StartRequest{Job: db.NewJob{
		Command: "(while :; do echo tick; sleep 0.01; done) & echo started",
	}})
	job = waitDone(t, s.db, job.ID, 20*time.Second)
	defer s.Kill(context.Background(), job.ID, 0)
	if got, want := job.Status, db.StatusDone; got != want {
		t.Errorf("status = %s, want %s", got, want)
	}
	out := output(t, s.db, job.ID, "")
	if !bytes.Contains(out, []byte("started\n")) || !bytes.Contains(out, []byte("tick\n")) {
		t.Errorf("output = %q, want started and ticks", out)
	}
}
