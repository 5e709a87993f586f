package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// Output tests: no byte of a job's output is lost to a locked database, a
// full disk or the output cap, and reads say what they left out.
//
// Size knobs: JOBS_E2E_SPEW_BYTES (per job, default 24 MiB) for the floods
// under a foreign lock, JOBS_E2E_LOCK_HOLD (default 5s) for how long the
// lock is held, JOBS_E2E_LOCK_LONG=1 to run the variant that holds it
// three times the database's busy timeout.

func init() {
	// spew-stall SEED N GATE STALLS: waits for the file GATE, then writes
	// the stream of SEED, N bytes in writes of 1 B to 256 KiB, to stdout,
	// and writes the longest a single write blocked (in ns) to STALLS.
	helperModes["spew-stall"] = func(args []string) error {
		if len(args) != 4 {
			return errors.New("usage: spew-stall SEED N GATE STALLS")
		}
		seed, _ := strconv.ParseUint(args[0], 10, 64)
		n, _ := strconv.ParseInt(args[1], 10, 64)
		for {
			if _, err := os.Stat(args[2]); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling for the test's go
		}
		src := spewStream(seed)
		sizes := rand.New(rand.NewPCG(seed, 1))
		buf := make([]byte, 256<<10)
		var longest time.Duration
		for n > 0 {
			k := min(n, 1+sizes.Int64N(int64(len(buf))))
			if _, err := io.ReadFull(src, buf[:k]); err != nil {
				return err
			}
			t0 := time.Now()
			if _, err := os.Stdout.Write(buf[:k]); err != nil {
				return err
			}
			longest = max(longest, time.Since(t0))
			n -= k
		}
		return os.WriteFile(args[3], []byte(strconv.FormatInt(int64(longest), 10)), 0o600)
	}
}

// spewStream is the deterministic stream of seed that spew-stall writes.
func spewStream(seed uint64) io.Reader {
	var key [32]byte
	copy(key[:], "spew")
	key[8] = byte(seed)
	return bufio.NewReaderSize(rand.NewChaCha8(key), 1<<16)
}

// spewSum returns the sha256 of the first n bytes of seed's stream.
func spewSum(seed uint64, n int64) string {
	h := sha256.New()
	io.CopyN(h, spewStream(seed), n)
	return hex.EncodeToString(h.Sum(nil))
}

// storedStream returns the length and sha256 of what the database holds of
// one stream of a job, and checks that the chunks of the job, in seq
// order, have contiguous offsets with no gap in seq (the prefix property).
func (w *world) storedStream(id, stream string) (int64, string) {
	w.t.Helper()
	rows, err := w.sqlDB().QueryContext(context.Background(),
		`SELECT seq, stream, byte_offset, data FROM chunks WHERE job_id = ? ORDER BY seq`, id)
	if err != nil {
		w.t.Fatalf("read chunks: %v", err)
	}
	defer rows.Close()
	h := sha256.New()
	var n, next, nextSeq int64
	for rows.Next() {
		var seq, off int64
		var s string
		var data []byte
		if err := rows.Scan(&seq, &s, &off, &data); err != nil {
			w.t.Fatalf("read chunks: %v", err)
		}
		if seq != nextSeq || off != next {
			w.t.Errorf("chunk seq %d at offset %d, want seq %d at %d", seq, off, nextSeq, next)
		}
		nextSeq, next = seq+1, off+int64(len(data))
		if s == stream {
			h.Write(data)
			n += int64(len(data))
		}
	}
	if err := rows.Err(); err != nil {
		w.t.Fatalf("read chunks: %v", err)
	}
	return n, hex.EncodeToString(h.Sum(nil))
}

// peakRSS returns the peak resident set of pid in bytes (VmHWM).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Row B11 guards: while another process holds the database's write lock,
// output is spooled to disk beside the database and committed in order
// once the lock is free, so nothing is lost and no child write stalls.
func TestB11ForeignLockLosesNothing(t *testing.T) {
	hold := os.Getenv("JOBS_E2E_LOCK_HOLD")
	if hold == "" {
		hold = "5s"
	}
	lockFlood(t, hold)
}

// Row B11 guards: a lock held three times the database's busy timeout
// (every verb's own wait for it) still loses nothing and fails no job:
// the job's end is retried until it lands.
func TestB11LockThreeBusyTimeouts(t *testing.T) {
	if os.Getenv("JOBS_E2E_LOCK_LONG") != "1" {
		t.Skipf("holds the lock %v; set JOBS_E2E_LOCK_LONG=1 to run it", 3*db.BusyTimeout)
	}
	lockFlood(t, (3 * db.BusyTimeout).String())
}

func lockFlood(t *testing.T, hold string) {
	w := newWorld(t)
	n := envInt64("JOBS_E2E_SPEW_BYTES", 24<<20)
	gate := filepath.Join(w.base, "go")
	// A job that waits under the lock for the verbs to use.
	running := w.start(helper("until-eof")...)
	w.waitOutput(running, "started")
	seeds := []uint64{11, 12}
	ids := make([]string, len(seeds))
	stalls := make([]string, len(seeds))
	for i, seed := range seeds {
		stalls[i] = filepath.Join(w.base, fmt.Sprintf("stall%d", i))
		ids[i] = w.start(append([]string{"--max-output", "0", "--no-stdin"},
			helper("spew-stall", strconv.FormatUint(seed, 10), strconv.FormatInt(n, 10), gate, stalls[i])...)...)
	}
	sup := w.supervisorPID()

	locker := exec.Command(helperBin, "e2e-helper", "hold-lock", w.dbPath(), hold)
	out, err := locker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	locker.Stderr = os.Stderr
	if err := locker.Start(); err != nil {
		t.Fatal(err)
	}
	defer locker.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("locker said %q", line)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Under the lock, the read verbs answer and the floods go on.
	w.ok("poll", running)
	w.ok("log", running)
	w.ok("list")
	// The writing verbs wait for the lock (the busy timeout), they do not
	// fail.
	echo := w.start("--", "echo", "under the lock")
	w.ok("write", running, "data\n")
	if err := locker.Wait(); err != nil {
		t.Fatalf("locker: %v", err)
	}
	w.ok("write", running, "--eof")

	var lost, longest int64
	for i, id := range ids {
		j := w.waitTerminal(id, 2*time.Minute)
		if j.Status != "done" || j.DroppedBytes != 0 || j.OutputBytes != n {
			t.Errorf("flood %d: %s, %d of %d bytes, %d dropped", i, j.Status, j.OutputBytes, n, j.DroppedBytes)
		}
		got, sum := w.storedStream(id, "stdout")
		if want := spewSum(seeds[i], n); got != n || sum != want {
			t.Errorf("flood %d: stored %d bytes (sha256 %s), want %d (%s)", i, got, sum, n, want)
		}
		lost += n - got
		b, err := os.ReadFile(stalls[i])
		if err != nil {
			t.Fatalf("flood %d kept no stall log: %v", i, err)
		}
		s, _ := strconv.ParseInt(string(b), 10, 64)
		longest = max(longest, s)
	}
	if j := w.waitTerminal(running, 30*time.Second); j.Status != "done" {
		t.Errorf("job running under the lock ended %s", j.Status)
	}
	if j := w.waitTerminal(echo, 30*time.Second); j.Status != "done" {
		t.Errorf("job started under the lock ended %s", j.Status)
	}
	if stall := time.Duration(longest); stall >= time.Second {
		t.Errorf("a child's write stalled %v under the lock, want under 1s", stall)
	}
	rss := peakRSS(sup)
	if rss > 64<<20 {
		t.Errorf("supervisor peak RSS %d MiB, want at most 64", rss>>20)
	}
	ents, _ := os.ReadDir(filepath.Dir(w.dbPath()))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "jobs.db") {
			t.Errorf("left beside the database: %s", e.Name())
		}
	}
	w.integrity()
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d of %d bytes lost under a %s foreign lock; longest write stall %d ms; supervisor peak RSS %d MiB",
		lost, 2*n, hold, time.Duration(longest).Milliseconds(), rss>>20))
}
