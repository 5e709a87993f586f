package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
)

func init() {
	// dial-start SOCKET MARKER: connects to a supervisor's socket and asks
	// it, in the socket protocol, to run `touch MARKER`; prints the answer.
	helperModes["dial-start"] = func(args []string) error {
		c, err := net.Dial("unix", args[0])
		if err != nil {
			return err
		}
		defer c.Close()
		req := protocol.Request{Op: protocol.OpStart, Start: &protocol.StartRequest{
			Job:     db.NewJob{Command: "touch " + args[1], Cwd: "/"},
			BaseEnv: []string{"PATH=/usr/bin:/bin"},
		}}
		// A supervisor that refuses answers and hangs up without reading,
		// so the write may fail; its answer is still there to read.
		werr := json.NewEncoder(c).Encode(req)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("no answer: %w (write: %v)", err, werr)
		}
		fmt.Print(line)
		return nil
	}
}

// needRoot skips a test that must act as another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "needs root: acts as uid 65534 (nobody)")
	}
}

// publicHelper copies the test binary where uid 65534 may run it (the
// build directory is private to its owner).
func publicHelper(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "je2e-pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(helperBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "e2e-helper")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// asNobody runs the helper as uid/gid 65534 and returns what it printed.
func asNobody(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	c := exec.Command(bin, append([]string{"e2e-helper"}, args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	c.Dir = "/"
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	c.WaitDelay = time.Minute // a hang guard (a descendant holding the pipe), not a bound on speed: a loaded machine can take seconds to drain the pipe
	err := c.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), err
}

// Row D6 guards: the supervisor checks the kernel's record of every
// connecting process's uid (SO_PEERCRED) and refuses any but its own,
// whatever the socket's and directory's modes say.
func TestD6SocketPeerCheck(t *testing.T) {
	t.Parallel()
	needRoot(t)
	w := newWorld(t)
	w.start("--", "true") // starts the supervisor, logging to supervise.log
	rt := protocol.RuntimeDirFor(w.run, w.dbPath())
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(rt, protocol.SupervisorLogName))
		return string(b)
	}
	sock := filepath.Join(rt, "default.sock")
	bin := publicHelper(t)

	// The fault: every fence of file modes taken down on purpose.
	loosen := []string{w.base, w.run, filepath.Dir(rt), rt}
	for _, d := range loosen {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	markDir, err := os.MkdirTemp("", "je2e-mark")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(markDir)
	os.Chmod(markDir, 0o777)
	marker := filepath.Join(markDir, "ran")

	answer, err := asNobody(t, bin, "dial-start", sock, marker)
	if err != nil {
		t.Fatalf("uid 65534 could not reach the loosened socket (the test proves nothing): %v", err)
	}
	for _, d := range loosen {
		os.Chmod(d, 0o700)
	}
	if !strings.Contains(answer, `"error"`) || !strings.Contains(answer, "permission") {
		t.Errorf("uid 65534's start was not refused; answer: %s", answer)
	}
	var n int
	if err := w.sqlDB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d jobs exist after uid 65534's start, want only the first one", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("uid 65534's command ran as uid %d", os.Geteuid())
	}
	waitFor(t, 10*time.Second, "the refusal in the supervisor's log", func() bool {
		return strings.Contains(logs(), "uid 65534")
	})
	if got := strings.Count(logs(), "uid 65534"); got != 1 {
		t.Errorf("the refusal took %d log lines, want 1:\n%s", got, logs())
	}
	// The supervisor's own user is still served.
	id := w.start("--", "true")
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Errorf("a job of the supervisor's own user ended %s", j.Status)
	}
	t.Logf("MATRIX-FIGURE %s", "uid 65534 on a 0777 socket refused by SO_PEERCRED; no job created, 1 line in supervise.log")
}
