package jobs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testwait"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// A Start whose context ends after the supervisor has its request leaves no
// job running that its caller never learned of: the job is ended, and
// Start returns it with the context's error. (An MCP client that cancelled
// an execute_command while the supervisor was starting its job, on one
// busy core, left the job running, and nobody was told of it.)
//
// A proxy between the client and a real supervisor holds the answer to the
// start back: the job runs, the caller's context ends, and only then may
// the answer come.
func TestStartCancelledOnceSentEndsTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	c1 := open(t, jobs.Options{DB: path, Detached: true, Executable: jobsBin})
	warm, err := c1.Start(ctx, jobs.Spec{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Wait(ctx, []string{warm.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "proxy")
	if err := os.Mkdir(pdir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := holdAnswers(t, jobs.SocketPath(c1), filepath.Join(pdir, "p.sock"))

	c2 := open(t, jobs.Options{DB: path, Detached: true, Executable: jobsBin})
	if err := jobs.UseSocket(ctx, c2, p.path); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type started struct {
		j   jobs.Job
		err error
	}
	done := make(chan started, 1)
	go func() {
		j, err := c2.Start(sctx, jobs.Spec{Command: "sleep 300", Name: "undone"})
		done <- started{j, err}
	}()
	var id string
	testwait.For(t, time.Minute, "the supervisor runs the job", func() bool {
		l, err := c1.List(ctx, jobs.Filter{Name: "undone"})
		if err == nil && len(l) == 1 && l[0].Status == jobs.StatusRunning {
			id = l[0].ID
			return true
		}
		return false
	})
	cancel()
	// The caller gives up (Start returns) or ends the job it asked for
	// (a kill follows the start on the connection): then the answer may go.
	var r started
	var returned bool
	select {
	case r = <-done:
		returned = true
	case <-p.kill:
	case <-time.After(time.Minute):
		t.Fatal("Start neither returned nor ended its job within a minute of its context's end")
	}
	close(p.release)
	if !returned {
		select {
		case r = <-done:
		case <-time.After(time.Minute):
			t.Fatal("Start did not return within a minute of its answer")
		}
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Start = %v, want an error wrapping context.Canceled", r.err)
	}
	if r.j.ID != id {
		t.Errorf("Start returned job %q, want the job it started, %s", r.j.ID, id)
	}
	res, err := c1.Wait(ctx, []string{id}, jobs.WaitOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if j := res.Jobs[0]; j.Status != jobs.StatusKilled {
		t.Errorf("the job whose start was cancelled is %s, want killed (%s)", j.Status, j.Reason)
	}
}

// answerHolder is a proxy in front of a supervisor's socket: requests go
// through at once, answers carrying a job wait for release, and kill
// requests are announced on kill.
type answerHolder struct {
	path    string
	release chan struct{}
	kill    chan struct{}
	once    sync.Once
}

func holdAnswers(t *testing.T, target, path string) *answerHolder {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &answerHolder{path: path, release: make(chan struct{}), kill: make(chan struct{})}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("unix", target)
			if err != nil {
				in.Close()
				continue
			}
			go h.pass(in, out, func(line []byte) {
				if bytes.Contains(line, []byte(`"op":"kill"`)) {
					h.once.Do(func() { close(h.kill) })
				}
			})
			go h.pass(out, in, func(line []byte) {
				if bytes.Contains(line, []byte(`"job":`)) {
					<-h.release
				}
			})
		}
	}()
	return h
}

// pass copies from one end to the other line by line, calling each
// before it passes a line on.
func (h *answerHolder) pass(from, to net.Conn, each func([]byte)) {
	defer from.Close()
	defer to.Close()
	r := bufio.NewReader(from)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			each(line)
			if _, werr := to.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
