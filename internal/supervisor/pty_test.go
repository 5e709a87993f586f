package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

func ptyJob(command string) protocol.StartRequest {
	return protocol.StartRequest{Job: db.NewJob{Command: command, Mode: "pty"}}
}

// A pty job's stdout and stderr are one terminal: what it writes to
// either is stored as stream pty, in the order written, and its exit code
// is recorded.
func TestPTYOneStreamInOrder(t *testing.T) {
	s := startSupervisor(t, Config{})
	job := start(t, s, ptyJob(`test -t 0 && test -t 1 && test -t 2 && echo tty; echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 7`))
	if got, want := job.Mode, "pty"; got != want {
		t.Errorf("mode = %q, want %q", got, want)
	}
	job = waitDone(t, s.db, job.ID, 30*time.Second)
	if got, want := exitCode(job), 7; got != want {
		t.Errorf("exit code = %d, want %d (%s)", got, want, job.Status)
	}
	// The terminal's output processing turns \n into \r\n.
	if got, want := string(output(t, s.db, job.ID, logs.PTY)), "tty\r\nout1\r\nerr1\r\nout2\r\nerr2\r\n"; got != want {
		t.Errorf("pty stream = %q, want %q", got, want)
	}
	for _, st := range []logs.Stream{logs.Stdout, logs.Stderr} {
		if got := output(t, s.db, job.ID, st); len(got) != 0 {
			t.Errorf("stream %s = %q, want nothing", st, got)
		}
	}
}

// The master reads EIO once the job has closed the terminal; what the
// job wrote just before it exits is read before that, none of it lost.
func TestPTYLastOutputKept(t *testing.T) {
	s := startSupervisor(t, Config{})
	const n = 300000
	for i := range 3 {
		job := start(t, s, ptyJob(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; echo END%d`, n, i)))
		job = waitDone(t, s.db, job.ID, 30*time.Second)
		out := string(output(t, s.db, job.ID, logs.PTY))
		if got, want := strings.Count(out, "a"), n; got != want {
			t.Errorf("run %d: %d a's stored, want %d", i, got, want)
		}
		if !strings.HasSuffix(out, fmt.Sprintf("END%d\r\n", i)) {
			t.Errorf("run %d: output ends %q, want the last line", i, out[max(0, len(out)-20):])
		}
		if job.Status != vocab.StatusDone {
			t.Errorf("run %d: status %s (%s)", i, job.Status, job.Reason)
		}
	}
}

// Write types into the terminal, a key name is sent as the bytes a
// terminal sends, and end of input is ^D: the job's read returns end of
// file while the terminal stays open.
func TestPTYWriteKeysAndEOF(t *testing.T) {
	s := startSupervisor(t, Config{})
	job := start(t, s, ptyJob(`read x; echo "got <$x>"; read y; echo "then <$y>"; if read z; then echo "more <$z>"; else echo eof; fi`))
	ctx := context.Background()
	if n, err := s.Write(ctx, job.ID, []byte("bob\n"), false, 10*time.Second); err != nil || n != 4 {
		t.Fatalf("write = %d, %v", n, err)
	}
	waitOutput(t, s, job.ID, "got <bob>")
	if err := s.SendKeys(ctx, job.ID, []string{"ab", "BSpace", "c", "Enter"}, false); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, s, job.ID, "then <ac>")
	if _, err := s.Write(ctx, job.ID, nil, true, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	job = waitDone(t, s.db, job.ID, 30*time.Second)
	if out := string(output(t, s.db, job.ID, logs.PTY)); !strings.HasSuffix(out, "eof\r\n") {
		t.Errorf("output %q, want the job to read end of file", out)
	}
	if err := s.SendKeys(ctx, job.ID, []string{"Nope"}, false); err == nil {
		t.Error("send-keys to a finished pty job succeeded")
	}
}

// The window size is the one asked for, 80x24 by default.
func TestPTYWindowSize(t *testing.T) {
	s := startSupervisor(t, Config{})
	for _, tc := range []struct {
		cols, rows int
		want       string
	}{{0, 0, "24 80"}, {132, 43, "43 132"}} {
		req := ptyJob("stty size")
		req.Cols, req.Rows = tc.cols, tc.rows
		job := waitDone(t, s.db, start(t, s, req).ID, 30*time.Second)
		if got := strings.TrimSpace(string(output(t, s.db, job.ID, logs.PTY))); got != tc.want {
			t.Errorf("size %dx%d: stty size = %q, want %q", tc.cols, tc.rows, got, tc.want)
		}
	}
}

// A pty job's stdin cannot be /dev/null, and merge is for pipe jobs.
func TestPTYRefusals(t *testing.T) {
	s := startSupervisor(t, Config{})
	for name, req := range map[string]protocol.StartRequest{
		"no stdin":  {Job: db.NewJob{Command: "true", Mode: "pty", Stdin: "null"}},
		"merge":     {Job: db.NewJob{Command: "true", Mode: "pty"}, Merge: true},
		"bad mode":  {Job: db.NewJob{Command: "true", Mode: "vt100"}},
		"bad width": {Job: db.NewJob{Command: "true", Mode: "pty"}, Cols: 70000},
	} {
		if _, err := s.Start(context.Background(), req); !errors.Is(err, vocab.ErrInvalid) {
			t.Errorf("%s: start = %v, want invalid", name, err)
		}
	}
}

// With merge, stdout and stderr are one pipe: the lines of both are
// stored in the order the job wrote them, as stream stdout.
func TestMergeKeepsOrder(t *testing.T) {
	s := startSupervisor(t, Config{})
	var want strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&want, "o%d\ne%d\n", i, i)
	}
	req := protocol.StartRequest{Job: db.NewJob{Command: `i=0; while [ $i -lt 2000 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done`}, Merge: true}
	job := waitDone(t, s.db, start(t, s, req).ID, 60*time.Second)
	if got := string(output(t, s.db, job.ID, logs.Stdout)); got != want.String() {
		t.Errorf("merged output differs from the order written (%d bytes, want %d)", len(got), want.Len())
	}
	if got := output(t, s.db, job.ID, logs.Stderr); len(got) != 0 {
		t.Errorf("stderr stream holds %d bytes, want none", len(got))
	}
	evs, err := s.db.Events(context.Background(), db.EventFilter{AllScopes: true, JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	merged := false
	for _, e := range evs {
		if e.To == vocab.StatusRunning && strings.Contains(string(e.Detail), `"merged":true`) {
			merged = true
		}
	}
	if !merged {
		t.Errorf("the running event does not say the streams were merged: %+v", evs)
	}
}
