package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// Output tests: no byte of a job's output is lost to a locked database, a
// full disk or the output cap, and reads say what they left out.
//
// Size knobs: JOBS_E2E_SPEW_BYTES (per job, default 24 MiB) for the floods
// under a foreign lock, JOBS_E2E_LOCK_HOLD (default 5s) for how long the
// lock is held, JOBS_E2E_LOCK_LONG=1 to run the variant that holds it
// three times the database's busy timeout.

func init() {
	// peak-rss FILE CMD ARGS…: runs CMD with this process's stdio and
	// writes its peak resident memory in bytes to FILE; exits as CMD did.
	helperModes["peak-rss"] = func(args []string) error {
		c := exec.Command(args[1], args[2:]...)
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		runErr := c.Run()
		if c.ProcessState == nil {
			return runErr
		}
		rss := c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
		if err := os.WriteFile(args[0], []byte(strconv.FormatInt(rss, 10)), 0o600); err != nil {
			return err
		}
		return runErr
	}
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

// stallSpewSum returns the sha256 of the first n bytes of original's stream.
func stallSpewSum(seed uint64, n int64) string {
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
		`SELECT seq, stream, byte_offset, `+chunkColumns+` FROM chunks WHERE job_id = ? ORDER BY seq`, id)
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
		var size, ref sql.NullInt64
		if err := rows.Scan(&seq, &s, &off, &data, &size, &ref); err != nil {
			w.t.Fatalf("read chunks: %v", err)
		}
		data = chunkBytes(w.t, w.sqlDB(), data, size, ref)
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
	t.Parallel()
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
	t.Parallel()
	if os.Getenv("JOBS_E2E_LOCK_LONG") != "1" {
		t.Skipf("holds the lock %v; set JOBS_E2E_LOCK_LONG=1 to run it", 3*db.BusyTimeout)
	}
	lockFlood(t, (3 * db.BusyTimeout).String())
}

func lockFlood(t *testing.T, hold string) {
	w := newWorld(t)
	n := envInt64("JOBS_E2E_SPEW_BYTES", testlong.Pick[int64](8<<20, 24<<20))
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
	// The writing verbs wait for the lock (the busy timeout); past it,
	// start is refused with one line, and nothing is half made.
	echo := ""
	if r := w.jobs("start", "--", "echo", "under the lock"); r.code == 0 {
		echo = strings.TrimSpace(r.stdout)
	} else if !strings.Contains(r.stderr, "locked") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("start under the lock: %v", r)
	}
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
		if want := stallSpewSum(seeds[i], n); got != n || sum != want {
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
	if echo == "" && hold == "5s" {
		t.Errorf("start under a lock shorter than the busy timeout was refused")
	} else if echo != "" {
		if j := w.waitTerminal(echo, 30*time.Second); j.Status != "done" {
			t.Errorf("job started under the lock ended %s", j.Status)
		}
	}
	if stall := time.Duration(longest); stall >= time.Second {
		t.Errorf("a child's write stalled %v under the lock, want under 1s", stall)
	}
	// The lock comes during a flood like A1's, and the same bound holds:
	// the spool keeps what waits for the lock on disk, so the memory is
	// A1's (the appender's pending batches, the page cache, the collector's
	// headroom), which a loaded machine pushes to 64 MiB and a little over.
	rss := peakRSS(sup)
	if rss > supervisorRSSBound {
		t.Errorf("supervisor peak RSS %d MiB, want at most %d", rss>>20, supervisorRSSBound>>20)
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

// Row A3 guards: the output cap keeps exactly the first MiB and the newest
// rest, evicting whole chunks and then the front of one, so that exactly
// the excess is evicted; offsets stay absolute and a read across the gap
// says so.
func TestA3CapKeepsHeadAndNewestExactly(t *testing.T) {
	t.Parallel()
	// Scaled: the default cap's arithmetic (1 MiB head, 63 MiB newest, 200
	// MiB written) on an 8 MiB cap; JOBS_E2E_CAP_FULL=1 runs the full size.
	total, maxOutput := int64(25<<20), int64(8<<20)
	capArgs := []string{"--max-output", "8MiB"}
	if os.Getenv("JOBS_E2E_CAP_FULL") == "1" {
		total, maxOutput, capArgs = 200<<20, 64<<20, nil
	}
	const head = 1 << 20
	const seed = 3
	w := newWorld(t)
	gate := filepath.Join(w.base, "go")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	id := w.start(append(append(capArgs, "--no-stdin"),
		helper("spew-stall", strconv.Itoa(seed), strconv.FormatInt(total, 10), gate, filepath.Join(w.base, "stall"))...)...)
	j := w.waitTerminal(id, 5*time.Minute)
	if j.Status != "done" || j.OutputBytes != total || j.DroppedBytes != 0 {
		t.Fatalf("job %s, %d of %d bytes, %d dropped", j.Status, j.OutputBytes, total, j.DroppedBytes)
	}
	var evicted int64
	if err := w.sqlDB().QueryRowContext(context.Background(), `SELECT evicted_bytes FROM jobs WHERE id = ?`, id).Scan(&evicted); err != nil {
		t.Fatal(err)
	}
	if want := total - maxOutput; evicted != want {
		t.Errorf("evicted %d bytes, want exactly %d (%+d)", evicted, want, evicted-want)
	}

	// What is stored: [0, head) and [total-(maxOutput-head), total), each
	// byte-exact at its absolute offset.
	rows, err := w.sqlDB().QueryContext(context.Background(), `SELECT byte_offset, `+chunkColumns+` FROM chunks WHERE job_id = ? ORDER BY byte_offset`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tailStart := total - (maxOutput - head)
	hHead, hTail := sha256.New(), sha256.New()
	var next int64
	for rows.Next() {
		var off int64
		var data []byte
		var size, ref sql.NullInt64
		if err := rows.Scan(&off, &data, &size, &ref); err != nil {
			t.Fatal(err)
		}
		data = chunkBytes(t, w.sqlDB(), data, size, ref)
		if next == head {
			next = tailStart // the gap
		}
		if off != next {
			t.Fatalf("chunk at offset %d, want %d (head %d, newest from %d)", off, next, head, tailStart)
		}
		if off < head {
			hHead.Write(data)
		} else {
			hTail.Write(data)
		}
		next = off + int64(len(data))
	}
	if next != total {
		t.Fatalf("stored output ends at %d, want %d", next, total)
	}
	src := spewStream(seed)
	wantHead, wantTail := sha256.New(), sha256.New()
	io.CopyN(wantHead, src, head)
	io.CopyN(io.Discard, src, tailStart-head)
	io.CopyN(wantTail, src, total-tailStart)
	if !bytes.Equal(hHead.Sum(nil), wantHead.Sum(nil)) || !bytes.Equal(hTail.Sum(nil), wantTail.Sum(nil)) {
		t.Errorf("head or newest output differs from what the child wrote")
	}

	// A read across the gap returns the bytes on both sides and says what
	// lies between.
	r := w.jobs("log", id, "--offset", strconv.Itoa(head-10), "--limit", "20")
	if r.code != 0 || !strings.Contains(r.stderr, "evicted") || len(r.stdout) != 20 {
		t.Errorf("read across the gap: %v", r)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d MiB written against a %d MiB cap: first 1 MiB and last %d MiB byte-exact, evicted exactly %d bytes (%d MiB)",
		total>>20, maxOutput>>20, (maxOutput-head)>>20, evicted, evicted>>20))
}

// Row C5 guards: --grep examines at most MaxGrepLine bytes of a line, so a
// line without a newline of any length keeps a filtered read's memory
// bounded, and the result says it truncated (truncated and cut_lines in
// JSON, a note on stderr).
func TestC5GrepLongLineSaysTruncated(t *testing.T) {
	t.Parallel()
	n := envInt64("JOBS_E2E_LONG_LINE_BYTES", testlong.Pick[int64](8<<20, 32<<20)) // 256 MiB: 268435456
	w := newWorld(t)
	id := w.start("--max-output", "0", "--", "sh", "-c",
		fmt.Sprintf(`printf 'first\nsecond\n'; head -c %d /dev/zero | tr '\0' x`, n))
	if j := w.waitTerminal(id, 5*time.Minute); j.Status != "done" || j.OutputBytes != n+13 {
		t.Fatalf("job %s with %d bytes, want done with %d", j.Status, j.OutputBytes, n+13)
	}
	type page struct {
		Output     string `json:"output"`
		Start      int64  `json:"start"`
		TotalLines int64  `json:"total_lines"`
		CutLines   int64  `json:"cut_lines"`
		Truncated  bool   `json:"truncated"`
	}
	// read runs a read with its peak memory measured.
	// The read runs as the child of a small helper process, which reports
	// its peak: a child's maxrss counts the memory of the process it was
	// forked from until its exec (Linux keeps the larger of the two across
	// exec), and this test process has held floods by now.
	read := func(args ...string) (page, string, int64) {
		t.Helper()
		rssFile := filepath.Join(t.TempDir(), "rss")
		c := w.cmd(append([]string{"--json", "log", id}, args...)...)
		c.Args = append([]string{helperBin, "e2e-helper", "peak-rss", rssFile, jobsBin}, c.Args[1:]...)
		c.Path = helperBin
		var errb strings.Builder
		c.Stderr = &errb
		out, err := c.Output()
		if err != nil {
			t.Fatalf("log %v: %v %s", args, err, errb.String())
		}
		var p page
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("log %v: %v", args, err)
		}
		b, err := os.ReadFile(rssFile)
		if err != nil {
			t.Fatal(err)
		}
		rss, _ := strconv.ParseInt(string(b), 10, 64)
		return p, errb.String(), rss
	}
	const memBound = 96 << 20
	var peak int64

	// The search of the whole log: the long line matches, tested and shown
	// on its first MaxGrepLine bytes.
	rssFile := filepath.Join(t.TempDir(), "rss")
	c := w.cmd("--json", "log", id, "--grep", "x")
	c.Args = append([]string{helperBin, "e2e-helper", "peak-rss", rssFile, jobsBin}, c.Args[1:]...)
	c.Path = helperBin
	out, err := c.Output()
	if err != nil {
		t.Fatalf("log --grep x: %v", err)
	}
	var found struct {
		Matches []struct {
			Line   int64  `json:"line"`
			Offset int64  `json:"offset"`
			Text   string `json:"text"`
			Cut    bool   `json:"cut"`
		} `json:"matches"`
		Count    int64 `json:"count"`
		CutLines int64 `json:"cut_lines"`
	}
	if err := json.Unmarshal(out, &found); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatal(err)
	}
	rss, _ := strconv.ParseInt(string(b), 10, 64)
	peak = max(peak, rss)
	if found.Count != 1 || found.CutLines != 1 || len(found.Matches) != 1 || found.Matches[0].Line != 3 || found.Matches[0].Offset != 13 ||
		!found.Matches[0].Cut || len(found.Matches[0].Text) != jobs.MaxGrepLine {
		t.Errorf("search with --grep: count %d, cut_lines %d, matches %d; want the long line 3 at byte 13, cut at %d bytes",
			found.Count, found.CutLines, len(found.Matches), jobs.MaxGrepLine)
	}
	// Forward: the short lines match, the long one is examined in part.
	p, _, rss := read("--grep", "^s", "--offset", "0")
	peak = max(peak, rss)
	if !p.Truncated || p.CutLines != 1 || p.Output != "second\n" {
		t.Errorf("forward --grep: truncated %v, cut_lines %d, output %.40q", p.Truncated, p.CutLines, p.Output)
	}
	// Without --grep, the tail of 500 characters reads only the end.
	p, _, rss = read()
	peak = max(peak, rss)
	if p.Truncated || p.Output != strings.Repeat("x", 500) {
		t.Errorf("tail of 500 characters: truncated %v, %d bytes", p.Truncated, len(p.Output))
	}
	if peak > memBound {
		t.Errorf("a read of a %d-byte line peaked at %d MiB, want at most %d", n, peak>>20, memBound>>20)
	}
	// Text: a note on stderr.
	if r := w.jobs("log", id, "--grep", "x"); r.code != 0 || !strings.Contains(r.stderr, "truncated") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("text search with --grep: %.300v", r)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d MiB line without newline: --grep says truncated (1 line cut at %d MiB), line count 2 right, read peak RSS %d MiB",
		n>>20, jobs.MaxGrepLine>>20, peak>>20))
}

// Row B9 guards: on a full disk output is dropped and counted (never the
// job's end), the drop is named as dropped in every read, and once space
// returns the same supervisor stores output again (the WAL is
// checkpointed and truncated when it can be).
func TestB9DiskFullRecovers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	cases := []struct {
		disk    string
		ballast int64 // freed after the flood: the space that returns
		n       int64 // the flood
	}{
		// 1 MiB returns on the smallest disk: the 40 small jobs that
		// follow the return write a few hundred KiB of WAL before a
		// checkpoint lands (later on a loaded machine), and the 256 KiB
		// job then needs its room twice, in the WAL and in the file. With
		// 512 KiB it found the disk full again on a loaded machine.
		{"3m", 1 << 20, 16 << 20},
		{"4m", 1 << 20, 20 << 20},
		{"6m", 1 << 20, 8 << 20},
		{"8m", 2 << 20, 24 << 20},
		{"16m", 4 << 20, 20 << 20},
	}
	if !testlong.On() {
		// The smallest disk and the largest; the long run tries all.
		cases = []struct {
			disk    string
			ballast int64
			n       int64
		}{cases[0], cases[len(cases)-1]}
	}
	for _, c := range cases {
		t.Run(c.disk, func(t *testing.T) {
			t.Parallel() // each case has its own world and its own tmpfs
			diskFullRecovers(t, c.disk, c.ballast, c.n)
		})
	}
}

func diskFullRecovers(t *testing.T, disk string, ballast, n int64) {
	w := newWorld(t)
	mnt := filepath.Join(w.base, "m")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+disk+",mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	w.state = mnt
	first := w.start("--", "echo", "hello")
	w.waitTerminal(first, 30*time.Second)
	sup := w.supervisorPID()
	ballastPath := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballastPath, make([]byte, ballast), 0o600); err != nil {
		t.Fatal(err)
	}

	// The flood on the full disk: dropped and counted, the end lands.
	id := w.start(append([]string{"--max-output", "0", "--no-stdin"}, helper("flood", strconv.FormatInt(n, 10))...)...)
	j := w.waitTerminal(id, 2*time.Minute)
	dropped := j.DroppedBytes
	if j.Status != "done" || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("job on a full disk ended %s (exit %v, reason %q), want done with 0", j.Status, j.ExitCode, j.Reason)
	}
	if j.DroppedBytes <= 0 || j.DroppedBytes > j.OutputBytes || j.OutputBytes != n {
		_, events := w.status(id)
		t.Errorf("dropped %d of %d bytes written (child wrote %d); history:%s", j.DroppedBytes, j.OutputBytes, n, eventsText(events))
	}
	_, events := w.status(id)
	found := false
	for _, e := range events {
		if e.Kind == "output_dropped" {
			found = true
			if !bytes.Contains(bytes.ToLower(e.Detail), []byte("full")) {
				t.Errorf("output_dropped event does not say the disk is full: %s", e.Detail)
			}
		}
	}
	if !found {
		t.Errorf("no output_dropped event in %s", eventsText(events))
	}
	// Every read names the loss as dropped, never as evicted.
	for _, args := range [][]string{{"poll", id}, {"log", id}, {"wait", id}} {
		r := w.jobs(args...)
		if text := r.stdout + r.stderr; !strings.Contains(text, "dropped") || strings.Contains(text, "evicted") {
			t.Errorf("%s does not name the dropped output: %v", args[0], r)
		}
	}
	// start --wait says it on stderr, in one line, and exits with the
	// job's code. The first flood's end may have given space back (its
	// WAL copied and truncated once the job ended, later on a loaded
	// machine): the disk is filled again to within 256 KiB, room for the
	// job's rows and not for its 4 MiB.
	topUp := filepath.Join(mnt, "topup")
	fillLeaving(t, topUp, mnt, 256<<10)
	r := w.jobs(append([]string{"start", "--wait", "--max-output", "0", "--no-stdin"}, helper("flood", strconv.FormatInt(4<<20, 10))...)...)
	if r.code != 0 || !strings.Contains(r.stderr, "dropped") || !strings.Contains(r.stderr, "full") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("start --wait on a full disk: exit %d, stderr %q", r.code, r.stderr)
	}
	w.integrity()

	// No room at all: a verb that cannot write says so in one line.
	fill := filepath.Join(mnt, "fill")
	if f, err := os.Create(fill); err == nil {
		io.Copy(f, zeroReader{})
		f.Close()
	}
	late := ""
	r = w.jobs("start", "--", "echo", "late")
	t.Logf("start with no room: exit %d, stderr %q", r.code, r.stderr)
	if r.code == 0 {
		late = strings.TrimSpace(r.stdout)
	} else if !strings.HasPrefix(r.stderr, "jobs: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("start with no room: %v", r)
	}
	if err := errors.Join(os.Remove(fill), os.Remove(topUp)); err != nil {
		t.Fatal(err)
	}

	// Space returns: the same supervisor stores output whole again, job
	// after job, and the WAL does not eat the disk.
	if err := os.Remove(ballastPath); err != nil {
		t.Fatal(err)
	}
	if late != "" {
		if j := w.waitTerminal(late, 30*time.Second); j.Status != "done" {
			t.Errorf("job started with no room ended %s", j.Status)
		}
	}
	for i := 0; i < 40; i++ {
		e := w.start("--", "echo", "again")
		if j := w.waitTerminal(e, 30*time.Second); j.Status != "done" || j.DroppedBytes != 0 {
			t.Fatalf("job %d after space returned: %s, %d dropped; %s", i, j.Status, j.DroppedBytes, diskUse(mnt, w.dbPath()))
		}
	}
	const m = 256 << 10
	r = w.jobs(append([]string{"start", "--wait", "--max-output", "0", "--no-stdin"}, helper("flood", strconv.Itoa(m))...)...)
	if r.code != 0 || r.stderr != "" || len(r.stdout) != m {
		t.Errorf("start --wait after space returned: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	var after string
	if err := w.sqlDB().QueryRowContext(context.Background(), `SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	j = w.poll(after)
	got, sum := w.storedStream(after, "stdout")
	h := sha256.New()
	io.CopyN(h, pattern(), m)
	if j.Status != "done" || j.DroppedBytes != 0 || got != m || sum != hex.EncodeToString(h.Sum(nil)) {
		_, events := w.status(after)
		t.Errorf("job after space returned: %s, %d dropped, %d of %d bytes stored; %s; history:%s", j.Status, j.DroppedBytes, got, m, diskUse(mnt, w.dbPath()), eventsText(events))
	}
	if now := w.supervisorPID(); now != sup {
		t.Errorf("the supervisor changed (%d, then %d): want the same one to recover", sup, now)
	}
	w.integrity()
	wal, _ := os.Stat(w.dbPath() + "-wal")
	var walSize int64
	if wal != nil {
		walSize = wal.Size()
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%s disk, %d MiB flood: %d bytes dropped and counted, status landed, integrity ok; after freeing %d KiB the same supervisor stored a %d KiB job whole (WAL %d KiB)",
		disk, n>>20, dropped, ballast>>10, m>>10, walSize>>10))
}

// fillLeaving writes a file at path that leaves keep bytes free on the
// file system at dir (nothing when less is free).
func fillLeaving(t *testing.T, path, dir string, keep int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	n := max(0, int64(st.Bavail)*int64(st.Bsize)-keep)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.CopyN(f, zeroReader{}, n)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatalf("fill %s with %d bytes: %v", path, n, err)
	}
}

// diskUse describes the space of the file system at dir and the sizes of
// the database's files, for a failure message.
func diskUse(dir, dbPath string) string {
	var st syscall.Statfs_t
	_ = syscall.Statfs(dir, &st)
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	out := db.OutputPath(dbPath)
	return fmt.Sprintf("free %d KiB of %d KiB; database %d KiB, WAL %d KiB; output data file %d KiB, WAL %d KiB",
		int64(st.Bavail)*int64(st.Bsize)>>10, int64(st.Blocks)*int64(st.Bsize)>>10, size(dbPath)>>10, size(dbPath+"-wal")>>10,
		size(out)>>10, size(out+"-wal")>>10)
}

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
