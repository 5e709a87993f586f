package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/vocab"
)

// pageBytes is the page size the byte-exact check reads with: the largest
// `jobs log --limit` allows.
const pageBytes = 16 << 20

// outputKind is one kind of output the capture workload floods: random
// bytes (incompressible, all 256 byte values) or a build log (text, as
// compilers print it).
type outputKind struct {
	name string
	gen  func(path string, size int64) error
	// target is jobs' throughput goal for this output, in MiB/s (0: none).
	target float64
}

var outputKinds = []outputKind{
	{name: "text", gen: buildLog, target: 624e6 / (1 << 20)}, // 624 MB/s
	{name: "random", gen: spew},
}

// capture: for each kind of output, a child writes captureBytes of it (cat
// of a pre-generated file) as a job, until the job is done; against the
// same bytes copied by `cat src > file`, by a program that copies a child's
// pipe into a file (bench/cmd/pipefile, as task-spooler and pueue store
// output), and inserted raw into SQLite as 64 KiB rows with 4 KiB pages
// (jobs' page size) and with 64 KiB pages. Then poll/tail latency on the
// random job's history.
func (b *bench) capture(ctx context.Context) error {
	for _, k := range outputKinds {
		last := k.name == outputKinds[len(outputKinds)-1].name
		if err := b.captureKind(ctx, k, last); err != nil {
			return fmt.Errorf("capture %s: %w", k.name, err)
		}
	}
	return nil
}

func (b *bench) captureKind(ctx context.Context, k outputKind, pollAfter bool) error {
	w, err := b.newWorld("capture-" + k.name)
	if err != nil {
		return err
	}
	size := b.cfg.captureBytes
	src := filepath.Join(w.dir, "src.bin")
	fmt.Fprintf(os.Stderr, "   generating %s of %s output\n", parse.FormatSize(size), k.name)
	if err := k.gen(src, size); err != nil {
		return err
	}
	want, err := fileSHA(src)
	if err != nil {
		return err
	}
	// Warm the page cache for every contender alike.
	if _, err := fileSHA(src); err != nil {
		return err
	}

	// cat src > file
	dst := filepath.Join(w.dir, "dst.bin")
	catD, err := timed(exec.Command("/bin/sh", "-c", `cat "$1" > "$2"`, "sh", src, dst))
	if err != nil {
		return err
	}
	if got, _ := fileSHA(dst); got != want {
		return fmt.Errorf("cat baseline copied wrong bytes")
	}

	// A runner that copies its child's pipe into a file.
	var peerD time.Duration
	peer := filepath.Join(filepath.Dir(b.self), "pipefile")
	if fileExists(peer) {
		out := filepath.Join(w.dir, "peer.bin")
		if peerD, err = timed(exec.Command(peer, out, "cat", src)); err != nil {
			return fmt.Errorf("pipefile: %w", err)
		}
		if got, _ := fileSHA(out); got != want {
			return fmt.Errorf("pipefile copied wrong bytes")
		}
		os.Remove(out)
	}

	// raw SQLite inserts, in jobs' 4 KiB pages and in 64 KiB pages
	raw := filepath.Join(w.dir, "raw.db")
	rawD := map[int]time.Duration{}
	for _, page := range []int{4096, 65536} {
		d, err := rawInsert(ctx, raw, src, page)
		if err != nil {
			return fmt.Errorf("raw sqlite, %d-byte pages: %w", page, err)
		}
		rawD[page] = d
		for _, suf := range []string{"", "-wal", "-shm"} {
			os.Remove(raw + suf)
		}
	}

	// jobs: warm supervisor, then start → done.
	if _, err := w.start("", "--ttl", "1h", "true"); err != nil {
		return err
	}
	sup, err := w.supervisor(ctx)
	if err != nil {
		return err
	}
	var peakRSS atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // VmHWM is the peak itself; the sampling only keeps the last value readable after exit
		defer wg.Done()
		for {
			if kb := statusKB(sup, "VmHWM"); kb > peakRSS.Load() {
				peakRSS.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	id, err := w.start("", "--max-output", "0", "--ttl", "0", "--timeout", "0", "--no-stdin", "--", "cat", src)
	if err != nil {
		close(stop)
		wg.Wait()
		return err
	}
	_, werr := w.jobs("", "wait", id)
	jobsD := time.Since(t0)
	close(stop)
	wg.Wait()
	if werr != nil {
		return werr
	}
	st, err := w.status("", id)
	if err != nil {
		return err
	}
	// Byte-exact: sha256 of the paged `jobs log --offset --limit` output.
	h := sha256.New()
	var read int64
	for off := int64(0); off < st.OutputBytes; off += pageBytes {
		c := w.cmd("", "log", id, "--offset", strconv.FormatInt(off, 10), "--limit", strconv.Itoa(pageBytes))
		out, err := c.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		n, _ := io.Copy(h, out)
		if err := c.Wait(); err != nil {
			return fmt.Errorf("jobs log --offset %d: %w", off, err)
		}
		read += n
	}
	got := hex.EncodeToString(h.Sum(nil))
	exact := got == want && read == size && st.OutputBytes == size && st.DroppedBytes == 0
	rate := func(d time.Duration) string { return fmt.Sprintf("%.0f MiB/s", mibps(size, d)) }
	jr := mibps(size, jobsD)
	wl := "capture " + parse.FormatSize(size) + " " + k.name
	if k.target > 0 {
		b.add(row{workload: wl, metric: "throughput", jobs: rate(jobsD), target: fmt.Sprintf("≥ %.0f MiB/s", k.target), ok: yes(jr >= k.target)})
	}
	r4, r64 := mibps(size, rawD[4096]), mibps(size, rawD[65536])
	b.add(row{workload: wl, metric: "throughput vs raw SQLite 64 KiB rows, 4 KiB pages", jobs: rate(jobsD), baseline: rate(rawD[4096]),
		ratio: ratio(jr, r4), target: "≥ 0.70", ok: yes(jr/r4 >= 0.7)})
	b.add(row{workload: wl, metric: "throughput vs raw SQLite 64 KiB rows, 64 KiB pages", jobs: rate(jobsD), baseline: rate(rawD[65536]), ratio: ratio(jr, r64)})
	if peerD > 0 {
		b.add(row{workload: wl, metric: "throughput vs a program copying the pipe to a file", jobs: rate(jobsD), baseline: rate(peerD), ratio: ratio(jr, mibps(size, peerD))})
	}
	b.add(row{workload: wl, metric: "throughput vs `cat src > file`", jobs: rate(jobsD), baseline: rate(catD), ratio: ratio(jr, mibps(size, catD))})
	b.add(row{workload: wl, metric: "byte-exact (sha256 of paged `jobs log`)", jobs: fmt.Sprintf("%s, %d B read, status %s", yesNo(exact), read, st.Status),
		target: "exact", ok: pass(exact && st.Status == string(vocab.StatusDone))})
	if kb, err := w.dbKiB(); err == nil {
		b.add(row{workload: wl, metric: "database size after the capture (files and WALs)", jobs: fmt.Sprintf("%.1f MiB", float64(kb)/1024),
			baseline: parse.FormatSize(size), ratio: ratio(float64(kb)*1024, float64(size))})
	}
	peak := peakRSS.Load()
	if kb := statusKB(sup, "VmHWM"); kb > peak {
		peak = kb
	}
	b.add(row{workload: wl, metric: "supervisor peak RSS (VmHWM)", jobs: fmt.Sprintf("%.1f MiB", float64(peak)/1024),
		target: "≤ 64 MiB", ok: yes(peak > 0 && peak <= 64*1024)})
	os.Remove(src)
	if !pollAfter {
		os.Remove(dst)
		w.stopSupervisor(ctx)
		return nil
	}
	return b.pollLatency(ctx, w, id, dst, size)
}

// buildLog writes size bytes of a build log to path: compiler command
// lines, progress lines and warnings, as a large build prints them.
func buildLog(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewChaCha8([32]byte{'l', 'o', 'g'}))
	dirs := []string{"src/core/alloc", "src/net/http_client", "lib/util/strings", "src/db/pager", "tests/unit/parse_test"}
	var line []byte
	var n int64
	for i := 0; n < size; i++ {
		d, m := dirs[rng.IntN(len(dirs))], i%977
		line = line[:0]
		switch k := i % 10; {
		case k < 6:
			line = fmt.Appendf(line, "  CC      %s_%d.o\n", d, m)
		case k < 8:
			line = fmt.Appendf(line, "gcc -O2 -g -Wall -Wextra -I include -I build/gen -c %s_%d.c -o build/%s_%d.o\n", d, m, d, m)
		case k == 8:
			line = fmt.Appendf(line, "%s_%d.c:%d:%d: warning: unused variable 'tmp%d' [-Wunused-variable]\n", d, m, 1+rng.IntN(2000), 1+rng.IntN(80), rng.IntN(100))
		default:
			line = fmt.Appendf(line, "[%3d%%] Built target %s_%d\n", int64(i)*100/(size/60+1), filepath.Base(d), m)
		}
		line = line[:min(int64(len(line)), size-n)]
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
		n += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func yesNo(ok bool) string {
	if ok {
		return "exact"
	}
	return "DIFFERS"
}

// pollLatency: `jobs poll ID` on the job with the big history against
// `tail -c 500` of the same bytes in a file; and a 64 KiB page from the
// middle against `tail` too.
func (b *bench) pollLatency(ctx context.Context, w *world, id, file string, size int64) error {
	var poll, deep, tail []time.Duration
	mid := strconv.FormatInt(size/2, 10)
	for i := 0; i < b.cfg.pollRuns; i++ {
		d, err := timed(w.cmd("", "poll", id))
		if err != nil {
			return err
		}
		poll = append(poll, d)
		if d, err = timed(w.cmd("", "log", id, "--offset", mid, "--limit", "65536")); err != nil {
			return err
		}
		deep = append(deep, d)
		if d, err = timed(exec.Command("tail", "-c", "500", file)); err != nil {
			return err
		}
		tail = append(tail, d)
	}
	pm, dm, tm := median(poll), median(deep), median(tail)
	wl := "read, " + parse.FormatSize(size) + " history"
	b.add(row{workload: wl, metric: "`jobs poll ID` vs `tail -c 500 file`", jobs: ms(pm), baseline: ms(tm),
		ratio: ratio(float64(pm), float64(tm)), target: "≤ 8 ms", ok: yes(pm <= 8*time.Millisecond)})
	b.add(row{workload: wl, metric: "`jobs log --offset <middle> --limit 64KiB` vs `tail -c 500 file`", jobs: ms(dm), baseline: ms(tm),
		ratio: ratio(float64(dm), float64(tm))})
	os.Remove(file)
	w.stopSupervisor(ctx)
	return nil
}

func fileSHA(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
