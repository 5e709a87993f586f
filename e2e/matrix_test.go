package e2e

// Shared pieces of the reliability matrix rows (the table in
// docs/reliability.md): the helper
// modes that load a supervisor, the checks of what it stored, and the
// readings of its process in procfs. Each row test logs its result as a
// "MATRIX-FIGURE" line, which scripts/matrix.sh collects.
//
// Size knobs: JOBS_E2E_SCALE divides the load rows' sizes (default 8 under
// -race, 2 for A1, 1 otherwise, each doubled unless the long sizes are on;
// 1 gives the sizes the matrix states).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/testlong"
)

func init() {
	helperModes["spew"] = spewMode
	helperModes["trickle"] = trickleMode
}

// scale is the divisor of the load rows' sizes.
//
// The suite runs the rows smaller than the matrix states them, sized for
// a two-core machine running every package at once: by 8 with the long
// sizes (internal/testlong) and by 16 without, since the rows' checks hold
// at any size. JOBS_E2E_SCALE=1 runs the matrix's own sizes.
func scale() int64 { return scaleOr(8) }

// scaleOr is the divisor of a load row's sizes: div with the long sizes,
// twice div without, or JOBS_E2E_SCALE.
func scaleOr(div int64) int64 {
	return envInt64("JOBS_E2E_SCALE", testlong.Pick[int64](2, 1)*div)
}

// figure logs the row's result for the matrix report; a test that has
// failed says so first, since its figure may state what it wanted.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	prefix := ""
	if t.Failed() {
		prefix = "FAILED: "
	}
	t.Logf("MATRIX-FIGURE %s%s", prefix, fmt.Sprintf(format, args...))
}

// spewKey is the key of the pseudo-random stream a spew helper writes on
// one stream: every job and stream has its own.
func spewKey(seed uint64, stream string) [32]byte {
	var k [32]byte
	copy(k[:], fmt.Sprintf("spew %d %s", seed, stream))
	return k
}

// spewMode is `spew SEED OUT ERR`: OUT bytes on stdout and ERR bytes on
// stderr at the same time, each stream deterministic from SEED, in writes
// of 1 B to 256 KiB (log-uniform, so small writes are as common as big
// ones).
func spewMode(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: spew SEED OUT ERR")
	}
	seed, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return err
	}
	var sizes [2]int64
	for i, a := range args[1:] {
		if sizes[i], err = strconv.ParseInt(a, 10, 64); err != nil {
			return err
		}
	}
	errs := make(chan error, 2)
	for i, f := range []*os.File{os.Stdout, os.Stderr} {
		go func() { errs <- spewTo(f, seed, []string{"stdout", "stderr"}[i], sizes[i]) }()
	}
	return errors.Join(<-errs, <-errs)
}

func spewTo(f *os.File, seed uint64, stream string, n int64) error {
	src := rand.NewChaCha8(spewKey(seed, stream))
	sizes := rand.New(rand.NewPCG(seed, uint64(len(stream))))
	buf := make([]byte, 256<<10)
	for n > 0 {
		e := sizes.IntN(19) // 1 B … 256 KiB
		size := int64(1<<e + sizes.IntN(1<<e))
		size = min(size, int64(len(buf)), n)
		_, _ = src.Read(buf[:size])
		if _, err := f.Write(buf[:size]); err != nil {
			return fmt.Errorf("write %s: %w", stream, err)
		}
		n -= size
	}
	return nil
}

// spewSum is the sha256 of the first n bytes a spew helper writes on
// stream.
func spewSum(seed uint64, stream string, n int64) [32]byte {
	h := sha256.New()
	_, _ = io.CopyN(h, rand.NewChaCha8(spewKey(seed, stream)), n)
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// trickleMode is `trickle INTERVAL DURATION`: one line "L <n> <unix ns>"
// every INTERVAL for DURATION on stdout, each in one write(2); then, on
// stderr, the longest a single write blocked ("stall-max-us N lines M").
func trickleMode(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: trickle INTERVAL DURATION")
	}
	every, err := time.ParseDuration(args[0])
	if err != nil {
		return err
	}
	dur, err := time.ParseDuration(args[1])
	if err != nil {
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var stall time.Duration
	n := 0
	for end := time.Now().Add(dur); time.Now().Before(end); n++ {
		<-tick.C
		line := fmt.Sprintf("L %d %d\n", n, time.Now().UnixNano())
		began := time.Now()
		if _, err := os.Stdout.WriteString(line); err != nil {
			return err
		}
		stall = max(stall, time.Since(began))
	}
	_, err = fmt.Fprintf(os.Stderr, "stall-max-us %d lines %d\n", stall.Microseconds(), n)
	return err
}

// spewJob is one spew job: its id, seed and stream sizes.
type spewJob struct {
	id       string
	seed     uint64
	out, err int64
}

// startSpews starts n spew jobs (seeds seed, seed+1 …) with no output cap.
func (w *world) startSpews(n int, seed uint64, out, errb int64) []spewJob {
	w.t.Helper()
	jobs := make([]spewJob, n)
	for i := range jobs {
		s := seed + uint64(i)
		id := w.start(append([]string{"--max-output", "0", "--no-stdin", "--ttl", "0"},
			helper("spew", strconv.FormatUint(s, 10), strconv.FormatInt(out, 10), strconv.FormatInt(errb, 10))...)...)
		jobs[i] = spewJob{id: id, seed: s, out: out, err: errb}
	}
	return jobs
}

// waitEnded blocks in `jobs wait` until every job has ended.
func (w *world) waitEnded(ids []string, d time.Duration) {
	w.t.Helper()
	args := append([]string{"wait", "--timeout", d.String()}, ids...)
	if r := w.jobs(args...); r.stderr != "" && !strings.Contains(r.stderr, "exit") {
		// The exit code is the jobs' own; only a complaint of wait matters.
		for _, id := range ids {
			if j, _ := w.status(id); j.Status == "running" || j.Status == "starting" {
				w.t.Fatalf("%v", r)
			}
		}
	}
}

// storedStream is what the database holds of one stream of a job.
type storedStream struct {
	n   int64
	sum [32]byte
}

// checkStored reads a finished job's chunks in seq order and checks the
// framing: seq 0, 1, 2 … without a gap, and each chunk's combined offset
// where the previous one ended. It returns each stream's length and hash
// and the number of chunks.
func checkStored(t *testing.T, d *sql.DB, id string) (map[string]storedStream, int) {
	t.Helper()
	rows, err := d.QueryContext(context.Background(),
		`SELECT seq, stream, byte_offset, `+chunkColumns+` FROM chunks WHERE job_id = ? ORDER BY seq`, id)
	if err != nil {
		t.Fatalf("read chunks: %v", err)
	}
	defer rows.Close()
	type tally struct {
		n int64
		h interface {
			io.Writer
			Sum([]byte) []byte
		}
	}
	streams := map[string]*tally{}
	var seq, off int64
	var n int
	for rows.Next() {
		var s, o int64
		var stream string
		var data []byte
		var size, ref sql.NullInt64
		if err := rows.Scan(&s, &stream, &o, &data, &size, &ref); err != nil {
			t.Fatalf("read chunks: %v", err)
		}
		data = chunkBytes(t, d, data, size, ref)
		if s != seq {
			t.Errorf("job %s: chunk seq %d follows %d", id, s, seq-1)
		}
		if o != off {
			t.Errorf("job %s: chunk %d at offset %d, the previous one ended at %d", id, s, o, off)
		}
		seq, off = s+1, o+int64(len(data))
		st := streams[stream]
		if st == nil {
			st = &tally{h: sha256.New()}
			streams[stream] = st
		}
		st.n += int64(len(data))
		_, _ = st.h.Write(data)
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read chunks: %v", err)
	}
	out := map[string]storedStream{}
	for name, st := range streams {
		var s storedStream
		s.n = st.n
		st.h.Sum(s.sum[:0])
		out[name] = s
	}
	return out, n
}

// checkSpew checks that a finished spew job ended done with exit 0 and
// that both its streams are stored byte-exact. It returns the chunks read
// and how many of its streams were not byte-exact.
func (w *world) checkSpew(d *sql.DB, sj spewJob) (chunks, inexact int) {
	w.t.Helper()
	j, events := w.status(sj.id)
	if j.Status != "done" || j.ExitCode == nil || *j.ExitCode != 0 || j.DroppedBytes != 0 {
		w.t.Errorf("job %s ended %s (exit %v, reason %q, %d bytes dropped), want done with 0; history:%s",
			sj.id, j.Status, j.ExitCode, j.Reason, j.DroppedBytes, eventsText(events))
	}
	got, chunks := checkStored(w.t, d, sj.id)
	if j.Status != "done" {
		inexact = 2
	}
	for stream, n := range map[string]int64{"stdout": sj.out, "stderr": sj.err} {
		want := storedStream{n: n, sum: spewSum(sj.seed, stream, n)}
		if g := got[stream]; g != want {
			inexact = min(inexact+1, 2)
			w.t.Errorf("job %s %s: stored %d bytes (sha256 %x), the child wrote %d (sha256 %x)",
				sj.id, stream, g.n, g.sum[:6], want.n, want.sum[:6])
		}
	}
	return chunks, inexact
}

// checkSpews checks every job with checkSpew and sums up.
func (w *world) checkSpews(d *sql.DB, jobs []spewJob) (chunks, exact, streams int) {
	w.t.Helper()
	for _, j := range jobs {
		c, bad := w.checkSpew(d, j)
		chunks += c
		exact += 2 - bad
		streams += 2
	}
	return chunks, exact, streams
}

// procStatus returns a "kB" field (VmHWM, VmRSS) or a count (Threads) of
// /proc/PID/status, or -1.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

// fdsBesides counts pid's open descriptors: those not of file, and those
// of it (or of its -wal and -shm).
func fdsBesides(pid int, file string) (other, of int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1, -1
	}
	for _, e := range ents {
		target, err := os.Readlink(dir + "/" + e.Name())
		if err == nil && strings.HasPrefix(target, file) {
			of++
		} else if err == nil {
			other++
		}
	}
	return other, of
}

// childrenOf returns the pids whose parent is pid, with their states.
func childrenOf(pid int) map[int]byte {
	out := map[int]byte{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out[c] = f[0][0]
		}
	}
	return out
}

// try is jobs without the test's Fatal, for goroutines other than the
// test's own.
func (w *world) try(args ...string) (result, error) {
	c := w.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return result{}, fmt.Errorf("run jobs %v: %w", args, err)
	}
	return result{args: args, stdout: out.String(), stderr: errb.String(), code: code}, nil
}

// parallel runs f(i) for i in [0, n) on at most k goroutines and returns
// the errors it gave.
func parallel(n, k int, f func(i int) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for g := 0; g < k; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// quantile is the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
