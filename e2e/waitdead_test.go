package e2e

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestWaitersNoticeADeadSupervisor: waits that sleep until a status
// changes still end when the supervisor dies without recording its job's
// end: jobs wait and jobs log -f look on their own every few seconds, find
// the supervisor gone and the job lost, and return.
func TestWaitersNoticeADeadSupervisor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("sleep 600")
	job := w.poll(id)
	defer syscall.Kill(-job.PID, syscall.SIGKILL) // the job (its group) outlives its supervisor
	waiters := map[string]*exec.Cmd{
		"wait":   w.cmd("wait", id),
		"log -f": w.cmd("log", "-f", id),
	}
	done := make(chan string, len(waiters))
	for name, c := range waiters {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = c.Wait() // wait exits non-zero for a lost job
			done <- name
		}()
	}
	if err := syscall.Kill(w.supervisorPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(60 * time.Second)
	for range waiters {
		select {
		case <-done:
		case <-timeout:
			for _, c := range waiters {
				c.Process.Kill()
			}
			t.Fatal("a waiter did not return within 60 s after its job's supervisor died")
		}
	}
	if got := w.poll(id).Status; got != "lost" {
		t.Errorf("status after the supervisor died: %s, want lost", got)
	}
}
