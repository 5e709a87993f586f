package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// frames is list --watch's output, read as it comes.
type frames struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (f *frames) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.Write(p)
}

// last is the newest complete frame (each starts with its header line).
func (f *frames) last() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(f.b.String(), "jobs list --watch")
	n := len(parts) - 1
	if n < 1 {
		return "", 0
	}
	return parts[n], n
}

// cpuTicks is the user and system CPU time of a process, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestListWatchRedrawsOnChange: list --watch draws the table, and draws it
// again when a job starts and when it ends, woken by the change.
func TestListWatchRedrawsOnChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start("true") // the database exists
	c := exec.Command(jobsBin, "list", "--watch")
	c.Env = e.environ()
	var out frames
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	eventually(t, 30*time.Second, "the first frame", func() bool { _, n := out.last(); return n >= 1 })

	id := e.start("--name", "watched", "sleep 60")
	eventually(t, 30*time.Second, "a frame with the new job running", func() bool {
		f, _ := out.last()
		return strings.Contains(f, "watched") && strings.Contains(f, "running")
	})
	e.ok("kill", id)
	eventually(t, 30*time.Second, "a frame with the job killed", func() bool {
		f, _ := out.last()
		return strings.Contains(f, "watched") && strings.Contains(f, "killed")
	})

	// Idle: what the watch costs while nothing changes, as a figure.
	_, n0 := out.last()
	t0 := cpuTicks(t, c.Process.Pid)
	time.Sleep(3 * time.Second) // a window to measure, not a wait for an event
	_, n1 := out.last()
	t.Logf("list --watch idle for 3 s: %d CPU ticks, %d redraws", cpuTicks(t, c.Process.Pid)-t0, n1-n0)

	// Interrupted, it exits 0.
	_ = c.Process.Signal(syscall.SIGINT)
	if err := c.Wait(); err != nil {
		t.Errorf("list --watch after SIGINT: %v", err)
	}
	checkError(t, e.run2("list", "--watch", "--json"), ExitUsage, "--watch draws a table")
}
