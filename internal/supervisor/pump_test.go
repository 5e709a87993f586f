package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
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
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{
		Command: "(while :; do echo tick; sleep 0.01; done) & echo started",
	}})
	job = waitDone(t, s.db, job.ID, 20*time.Second)
	defer s.Kill(context.Background(), job.ID, 0)
	if got, want := job.Status, vocab.StatusDone; got != want {
		t.Errorf("status = %s, want %s", got, want)
	}
	out := output(t, s.db, job.ID, "")
	if !bytes.Contains(out, []byte("started\n")) || !bytes.Contains(out, []byte("tick\n")) {
		t.Errorf("output = %q, want started and ticks", out)
	}
}

// A trickle is read by the trickler, one pass a flush, while its pump
// sleeps; when the child speeds up to a flood the pump takes the pipe back,
// and every byte arrives in order.
func TestTrickleThenFlood(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	// It trickles until the test has seen the trickler take the pipe (a
	// file says so), however long the pump takes to judge it a trickle on
	// a busy machine; then it floods.
	dir := t.TempDir()
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{
		Command: "read go; i=0; while [ ! -e " + dir + "/flood ]; do i=$((i+1)); echo line $i; sleep 0.02; done; " +
			"head -c 3000000 /dev/zero | tr '\\0' x; echo; echo end",
	}})
	if _, err := s.Write(context.Background(), job.ID, []byte("go\n"), false, 0); err != nil {
		t.Fatal(err)
	}
	held := func() int {
		s.runners.trickle.mu.Lock()
		defer s.runners.trickle.mu.Unlock()
		return len(s.runners.trickle.pipes)
	}
	eventually(t, time.Minute, "the trickler to hold the job's stdout", func() bool { return held() > 0 })
	if err := os.WriteFile(filepath.Join(dir, "flood"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	job = waitDone(t, s.db, job.ID, time.Minute)
	if job.Status != vocab.StatusDone {
		t.Fatalf("status %s (%s)", job.Status, job.Reason)
	}
	got := output(t, s.db, job.ID, logs.Stdout)
	flood := append(append(bytes.Repeat([]byte("x"), 3000000), '\n'), "end\n"...)
	lines, ok := bytes.CutSuffix(got, flood)
	if !ok {
		t.Fatalf("stdout: %d bytes, not ending with the flood and end", len(got))
	}
	var want bytes.Buffer
	n := bytes.Count(lines, []byte("\n"))
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if n == 0 || !bytes.Equal(lines, want.Bytes()) {
		t.Errorf("stdout before the flood: %q, want lines 1 to %d in order", lines, n)
	}
	eventually(t, 30*time.Second, "the trickler to let go of every pipe", func() bool { return held() == 0 })
}

// Once a job's main process has exited, the trickler gives each pipe back
// to its pump after one more read, even though other processes still hold
// it open: the pump then waits for its end in the netpoller, which wakes at
// once, rather than the trickler finding it at its next round, up to a
// flush interval later (a killed tree took 40-60 ms more to end that way).
func TestTricklerLetsGoOnceMainExited(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, err := newPipe(r)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var got []byte
	var drain pipeDrain
	tp := &tricklePipe{p: p, emit: func(b []byte) { got = append(got, b...) }, drain: &drain, last: timeNow()}
	buf := make([]byte, 64<<10)

	if _, err := w.WriteString("a line\n"); err != nil {
		t.Fatal(err)
	}
	if !tp.read(buf, timeNow()) {
		t.Fatal("the trickler let go of a trickling pipe while the main process runs")
	}
	drain.set(timeNow().Add(time.Hour))
	if _, err := w.WriteString("last line\n"); err != nil {
		t.Fatal(err)
	}
	if tp.read(buf, timeNow()) {
		t.Fatal("the trickler kept a pipe after the main process exited")
	}
	if string(got) != "a line\nlast line\n" {
		t.Errorf("read %q", got)
	}
}

// TestSyncReadsPipesBeforeThePumpsRun: Sync stores what a job wrote to
// its pipes even when its pumps have not read them yet, however late the
// runner's goroutines are scheduled (a loaded or one-core machine): the
// pipes are the job's from its start, not from its pumps' first read. The
// pumps are held back here until Sync has answered; with a flush a minute
// away, only Sync's own read can have stored the prompt.
func TestSyncReadsPipesBeforeThePumpsRun(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{FlushInterval: time.Minute})
	hold := make(chan struct{})
	s.runners.holdPumps = hold
	mark := t.TempDir() + "/wrote"
	job := start(t, s, protocol.StartRequest{Job: db.NewJob{
		Command: fmt.Sprintf(`printf 'name? '; printf 'warn\n' >&2; : > %s; read x; echo "hi $x"`, mark)}})
	defer s.Kill(context.Background(), job.ID, 0)
	defer close(hold) // before the kill, which waits for the runner
	eventually(t, 30*time.Second, "the job to write its prompt", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	if err := s.Sync(context.Background(), job.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := string(output(t, s.db, job.ID, "")), "name? warn\n"; got != want {
		t.Fatalf("stored after Sync: %q, want %q", got, want)
	}
}
