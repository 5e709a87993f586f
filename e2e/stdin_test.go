package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testlong"
)

func init() {
	// read-stdin: prints the sha256 of all of its stdin.
	helperModes["read-stdin"] = func([]string) error {
		h := sha256.New()
		if _, err := io.Copy(h, os.Stdin); err != nil {
			return err
		}
		fmt.Println(hex.EncodeToString(h.Sum(nil)))
		return nil
	}
}

// writeInput writes n bytes of the pattern stream to a file and returns
// its path and sha256.
func writeInput(t *testing.T, n int64) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "input")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), pattern(), n); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// peakRSS returns a process's peak resident set (VmHWM) in bytes.
func mustPeakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	rss := peakRSS(pid)
	if rss == 0 {
		t.Fatalf("no VmHWM for pid %d", pid)
	}
	return rss
}

// Row C3 guards: a write to a job's stdin is streamed in pieces and bounded
// by an idle deadline (a job that takes nothing for --timeout is "not
// reading": the write stops and says how much went in), and --eof closes
// the pipe without waiting for a blocked writer. Size knob:
// JOBS_E2E_WRITE_BYTES (default 100 MiB).
func TestC3HugeStdinWrites(t *testing.T) {
	t.Parallel()
	n := envInt64("JOBS_E2E_WRITE_BYTES", testlong.Pick[int64](32<<20, 100<<20))
	input, sum := writeInput(t, n)
	w := newWorld(t)

	// A reader gets every byte.
	reader := w.start(helper("read-stdin")...)
	c := w.cmd("write", reader, "-", "--eof")
	in, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	c.Stdin = in
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("write %d bytes to a reader: %v\n%s", n, err, out)
	}
	in.Close()
	if j := w.waitTerminal(reader, time.Minute); j.Status != "done" {
		t.Fatalf("the reader ended %s", j.Status)
	}
	if got := strings.TrimSpace(w.ok("log", reader)); got != sum {
		t.Errorf("the reader's sha256 is %s, want %s", got, sum)
	}

	// A job that never reads: the write returns by its deadline with the
	// count, while other verbs answer.
	stuck := w.start(helper("ready-idle")...)
	w.waitOutput(stuck, "ready")
	const timeout = 2 * time.Second
	c = w.cmd("--json", "write", "--timeout", timeout.String(), stuck, "-")
	if in, err = os.Open(input); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	c.Stdin = in
	var out, errb lockedBuffer
	c.Stdout, c.Stderr = &out, &errb
	began := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var slowest time.Duration
	var werr error
	for finished := false; !finished; {
		select {
		case werr = <-done:
			finished = true
		default:
			if time.Since(began) > timeout+30*time.Second {
				c.Process.Kill()
				t.Fatalf("write to a job that does not read still blocked after %v (--timeout %v)", time.Since(began), timeout)
			}
			t0 := time.Now()
			w.ok("poll", stuck)
			w.ok("kill", "--signal", "CONT", stuck)
			if d := time.Since(t0); d > slowest {
				slowest = d
			}
		}
	}
	took := time.Since(began)
	if werr == nil || c.ProcessState.ExitCode() != 1 {
		t.Errorf("write to a job that does not read: %v, want exit 1\n%s", werr, errb.String())
	}
	// That it returned at all is the outcome (a write without its
	// deadline blocks for ever: the loop above fails it); how long after
	// the deadline is a figure.
	t.Logf("write returned after %v (--timeout %v)", took.Round(time.Millisecond), timeout)
	if s := errb.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "not reading") {
		t.Errorf("want one line saying the job is not reading; got %q", s)
	}
	var res struct {
		Bytes      int64 `json:"bytes"`
		NotReading bool  `json:"not_reading"`
	}
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		t.Fatalf("write --json: %v\n%s", err, out.String())
	}
	if !res.NotReading || res.Bytes <= 0 || res.Bytes >= n {
		t.Errorf("write --json says %+v; want not_reading and the pipe's worth of bytes", res)
	}
	// A hang guard, not a speed bound: the figure reports the time.
	if slowest > 30*time.Second {
		t.Errorf("poll and kill --signal took up to %v while the write was blocked", slowest)
	}

	// --eof works while another write is blocked (no deadline on that one),
	// and that write ends then.
	sup := w.supervisorPID()
	base := idleSockets(t, sup)
	blocked := w.cmd("write", "--timeout", "0", stuck, "more")
	var berr lockedBuffer
	blocked.Stderr = &berr
	if err := blocked.Start(); err != nil {
		t.Fatal(err)
	}
	bdone := make(chan error, 1)
	go func() { bdone <- blocked.Wait() }()
	// The blocked write's connection is open: its request is in the
	// supervisor, writing, before the eof below gets there.
	waitFor(t, 10*time.Second, "the blocked write's connection", func() bool { return fdCount(t, sup, "socket:") > base })
	t0 := time.Now()
	eof := w.cmd("write", stuck, "--eof")
	eof.Stdout, eof.Stderr = io.Discard, io.Discard
	if err := eof.Start(); err != nil {
		t.Fatal(err)
	}
	edone := make(chan error, 1)
	go func() { edone <- eof.Wait() }()
	etimer := time.NewTimer(10 * time.Second)
	defer etimer.Stop()
	select {
	case err := <-edone:
		if err != nil {
			t.Errorf("write --eof while another write is blocked: %v", err)
		}
	case <-etimer.C:
		eof.Process.Kill()
		blocked.Process.Kill()
		t.Fatalf("write --eof hung behind a blocked write")
	}
	eofTook := time.Since(t0)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-bdone:
	case <-timer.C:
		blocked.Process.Kill()
		t.Errorf("the blocked write did not end when stdin was closed")
	}
	peak := mustPeakRSS(t, sup)
	if peak > 64<<20 {
		t.Errorf("supervisor peak RSS %d MiB after a %d MiB write, want at most 64 MiB", peak>>20, n>>20)
	}
	w.ok("kill", stuck, "--grace", "100ms")
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d MiB to a reader: sha256 equal; never-reader took %d B, write exit 1 after %v (--timeout %v); --eof %v past a blocked write; slowest poll+signal %v; supervisor peak RSS %d MiB",
		n>>20, res.Bytes, took.Round(10*time.Millisecond), timeout, eofTook.Round(time.Millisecond), slowest.Round(time.Millisecond), peak>>20))
}

// fdCount counts the open descriptors of pid whose target starts with
// prefix ("" for all).
func fdCount(t *testing.T, pid int, prefix string) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, prefix) {
			n++
		}
	}
	return n
}

// idleSockets waits until the supervisor holds only its two listening
// sockets (its own and default.sock): the connections of CLIs that just
// exited are closed by the supervisor a moment later.
func idleSockets(t *testing.T, sup int) int {
	t.Helper()
	const listeners = 2
	waitFor(t, 10*time.Second, "the supervisor's connections to close", func() bool { return fdCount(t, sup, "socket:") <= listeners })
	return listeners
}
