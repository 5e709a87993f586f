package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// superviseDetached runs `jobs supervise` for the world with its output
// captured and waits until it serves default.sock. It returns the process
// and a channel closed once it has exited.
func (w *world) superviseDetached(args ...string) (*exec.Cmd, <-chan struct{}, *lockedBuffer) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(w.dbPath()), 0o700); err != nil {
		w.t.Fatal(err)
	}
	log := &lockedBuffer{}
	c := w.cmd(append([]string{"supervise"}, args...)...)
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	w.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
		}
	})
	sock := filepath.Join(w.runtimeDir(false), "default.sock")
	waitFor(w.t, 30*time.Second, "the supervisor's socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return c, exited, log
}

// startsOK starts `sh -c script` and fails the test unless the start
// succeeded; it returns the job's id.
func (w *world) startsOK(what, script string) string {
	w.t.Helper()
	r := w.jobs("start", "--no-stdin", script)
	if r.code != 0 {
		w.t.Fatalf("%s: %v\nsupervise.log: %s", what, r, readFile(filepath.Join(w.runtimeDir(false), "supervise.log")))
	}
	return strings.TrimSpace(r.stdout)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// Row E1 guards: a supervisor whose runtime directory was wiped under it
// (a cleaner of $XDG_RUNTIME_DIR, a user's rm -rf) neither unlinks the
// socket and lock a newer supervisor made at the same paths when it exits
// (Go's unix listener unlinks its path on Close, whoever's socket is there
// by then), nor leaves clients unable to reach it: it puts its lock and
// sockets back. Before, every start failed with "no answer on
// …/default.sock" until the newer supervisor idled out, 70 s in one run.
func TestE1RuntimeDirWipedUnderLiveSupervisor(t *testing.T) {
	t.Run("old supervisor exits after a new one started", func(t *testing.T) {
		w := newWorld(t)
		old, exited, log := w.superviseDetached("--idle", "1h")
		rt := w.runtimeDir(false)
		if err := os.RemoveAll(filepath.Join(w.run, "jobs")); err != nil {
			t.Fatal(err)
		}
		long := w.startsOK("the first start after the wipe", "sleep 40")
		// The old supervisor ends while the new one (or the old one,
		// having put its sockets back) serves the job.
		if err := old.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("the old supervisor did not exit within 60s of SIGTERM; its log:\n%s", log)
		}
		id := w.startsOK("a start after the old supervisor exited", "echo x")
		w.ok("wait", "--timeout", "60s", id)
		if out := w.ok("log", id); out != "x\n" {
			t.Errorf("the second job wrote %q, want x", out)
		}
		if _, err := os.Lstat(filepath.Join(rt, "default.sock")); err != nil {
			t.Errorf("default.sock after both starts: %v", err)
		}
		w.jobs("kill", long)
		t.Logf("MATRIX-FIGURE wiped runtime dir, old supervisor then exited: 2 of 2 starts succeeded, default.sock kept")
	})
	t.Run("default.sock removed under a live supervisor", func(t *testing.T) {
		w := newWorld(t)
		w.superviseDetached("--idle", "1h")
		sock := filepath.Join(w.runtimeDir(false), "default.sock")
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
		id := w.startsOK("a start after default.sock was removed", "echo y")
		w.ok("wait", "--timeout", "60s", id)
		if out := w.ok("log", id); out != "y\n" {
			t.Errorf("the job wrote %q, want y", out)
		}
		t.Logf("MATRIX-FIGURE default.sock removed under a live supervisor: the next start succeeded")
	})
}
