package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
)

// TestEnsureDefaultWaitsForASlowStart starts a supervisor that takes
// longer than EnsureDefaultTimeout to come up, as on a loaded machine: the
// caller waits for it while it lives instead of giving up.
func TestEnsureDefaultWaitsForASlowStart(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	rt := runtimeDir(t)
	dir := t.TempDir()
	goFile := filepath.Join(dir, "go")
	slow := filepath.Join(dir, "slow-supervisor")
	script := "#!/bin/sh\nwhile [ ! -e '" + goFile + "' ]; do sleep 0.05; done\nexec '" + testExe(t) + "' \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopDetached(t, d.Path, rt) })

	type answer struct {
		c   *protocol.Conn
		err error
	}
	done := make(chan answer, 1)
	began := time.Now()
	go func() {
		c, err := protocol.EnsureDefault(context.Background(), d, rt, slow)
		done <- answer{c, err}
	}()
	// Past the time EnsureDefault used to give up after, it still waits.
	for time.Since(began) < protocol.EnsureDefaultTimeout+time.Second {
		select {
		case a := <-done:
			t.Fatalf("EnsureDefault returned while its supervisor was still starting: %v", a.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("EnsureDefault after a slow start: %v", a.err)
		}
		a.c.Close()
	case <-time.After(protocol.EnsureDefaultPatience):
		t.Fatal("EnsureDefault did not return once its supervisor was up")
	}
}

// TestEnsureDefaultSaysTheSupervisorExited: a supervisor that cannot
// start is reported as gone, with where its log is.
func TestEnsureDefaultSaysTheSupervisorExited(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	rt := runtimeDir(t)
	failing := filepath.Join(t.TempDir(), "failing-supervisor")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho cannot start >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := protocol.EnsureDefault(context.Background(), d, rt, failing)
	if err == nil || !strings.Contains(err.Error(), "has exited") || !strings.Contains(err.Error(), protocol.SupervisorLogName) {
		t.Fatalf("EnsureDefault with a supervisor that exits = %v, want an error saying it exited and naming its log", err)
	}
}

// stopDetached ends the detached supervisors of the database at dbPath
// that serve runtime directory rt, and waits for each process to be gone.
func stopDetached(t *testing.T, dbPath, rt string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), "\x00supervise\x00") || !strings.Contains(string(b), dbPath) || !strings.Contains(string(b), rt) {
			continue
		}
		info, err := proc.Inspect(pid)
		if err != nil {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		eventually(t, time.Minute, "detached supervisor to exit", func() bool { return !proc.Alive(pid, info.StartTime) })
	}
}
