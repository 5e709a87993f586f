package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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

// capture: a child writes captureBytes of random bytes (cat of a
// pre-generated file) as a job, until the job is done; against the same
// bytes inserted raw into SQLite as 64 KiB rows and against `cat src > file`.
// Then poll/tail latency on that job's history.
func (b *bench) capture(ctx context.Context) error {
	w, err := b.newWorld("capture")
	if err != nil {
		return err
	}
	size := b.cfg.captureBytes
	src := filepath.Join(w.dir, "src.bin")
	fmt.Fprintf(os.Stderr, "   generating %s of random bytes\n", parse.FormatSize(size))
	if err := spew(src, size); err != nil {
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

	// raw SQLite inserts
	rawD, err := rawInsert(ctx, filepath.Join(w.dir, "raw.db"), src)
	if err != nil {
		return fmt.Errorf("raw sqlite: %w", err)
	}
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(w.dir, "raw.db"+suf))
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
	jr, rr, cr := mibps(size, jobsD), mibps(size, rawD), mibps(size, catD)
	wl := "capture " + parse.FormatSize(size)
	b.add(row{workload: wl, metric: "throughput vs raw SQLite 64 KiB rows", jobs: rate(jobsD), baseline: rate(rawD),
		ratio: ratio(jr, rr), target: "≥ 0.70", ok: yes(jr/rr >= 0.7)})
	b.add(row{workload: wl, metric: "throughput vs `cat src > file`", jobs: rate(jobsD), baseline: rate(catD), ratio: ratio(jr, cr)})
	b.add(row{workload: wl, metric: "byte-exact (sha256 of paged `jobs log`)", jobs: fmt.Sprintf("%s, %d B read, status %s", yesNo(exact), read, st.Status),
		target: "exact", ok: pass(exact && st.Status == string(vocab.StatusDone))})
	peak := peakRSS.Load()
	if kb := statusKB(sup, "VmHWM"); kb > peak {
		peak = kb
	}
	b.add(row{workload: wl, metric: "supervisor peak RSS (VmHWM)", jobs: fmt.Sprintf("%.1f MiB", float64(peak)/1024),
		target: "≤ 64 MiB", ok: yes(peak > 0 && peak <= 64*1024)})
	os.Remove(src)

	return b.pollLatency(ctx, w, id, dst, size)
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
