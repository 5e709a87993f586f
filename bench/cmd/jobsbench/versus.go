package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/vocab"
)

// versus: the workloads whose cost a change must not raise, run with this
// build and with a previous one (JOBS_BASE_BIN, built by `bench/run.sh
// --against REV`) in the same run. Each round runs both binaries, in
// alternating order so that a trend in the machine's load hits them alike,
// each on a fresh database and supervisor. The table gives the medians and
// the ratio this build / previous build.
func (b *bench) versus(ctx context.Context) error {
	if b.cfg.baseBin == "" {
		return fmt.Errorf("no previous build to compare with: run bench/run.sh --against REV")
	}
	size := b.cfg.captureBytes
	srcs := make([]string, len(outputKinds))
	for i, k := range outputKinds {
		srcs[i] = filepath.Join(b.cfg.work, "versus-"+k.name+".bin")
		if err := k.gen(srcs[i], size); err != nil {
			return err
		}
		defer os.Remove(srcs[i])
		if _, err := fileSHA(srcs[i]); err != nil { // warm the page cache alike for both
			return err
		}
	}
	type side struct {
		name, bin string
		capture   [][]time.Duration // per output kind
		capCPU    [][]time.Duration // the supervisor's CPU time for each capture
		cpu       []time.Duration
		rss       int64
	}
	sides := []*side{{name: "new", bin: b.cfg.jobsBin}, {name: "base", bin: b.cfg.baseBin}}
	for _, s := range sides {
		s.capture, s.capCPU = make([][]time.Duration, len(outputKinds)), make([][]time.Duration, len(outputKinds))
	}
	for round := 0; round < b.cfg.concRounds; round++ {
		order := []*side{sides[0], sides[1]}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			name := fmt.Sprintf("vs-%s-%d", s.name, round)
			var rates []string
			for i, k := range outputKinds {
				d, cpu, err := b.captureOnce(ctx, name+"-cap-"+k.name, s.bin, srcs[i], size)
				if err != nil {
					return fmt.Errorf("%s build, %s output: %w", s.name, k.name, err)
				}
				s.capture[i] = append(s.capture[i], d)
				s.capCPU[i] = append(s.capCPU[i], cpu)
				rates = append(rates, fmt.Sprintf("%s %.0f MiB/s (supervisor CPU %.2f s)", k.name, mibps(size, d), cpu.Seconds()))
			}
			r, err := b.concurrentRound(ctx, name+"-conc", s.bin)
			if err != nil {
				return fmt.Errorf("%s build: %w", s.name, err)
			}
			if r.lost > 0 || r.bad > 0 {
				return fmt.Errorf("%s build lost %d lines (%d out of order)", s.name, r.lost, r.bad)
			}
			s.cpu = append(s.cpu, r.cpu)
			s.rss = max(s.rss, r.peakKB)
			fmt.Fprintf(os.Stderr, "   round %d, %s build: capture %s, 100-job CPU %.2f s\n", round, s.name, strings.Join(rates, ", "), r.cpu.Seconds())
		}
	}
	newS, baseS := sides[0], sides[1]
	against := b.cfg.baseRev
	wl := "this build vs " + against
	for i, k := range outputKinds {
		nr, br := mibps(size, median(newS.capture[i])), mibps(size, median(baseS.capture[i]))
		b.add(row{workload: wl, metric: fmt.Sprintf("capture %s of %s output: throughput (median of %d)", parse.FormatSize(size), k.name, len(newS.capture[i])),
			jobs: fmt.Sprintf("%.0f MiB/s", nr), baseline: fmt.Sprintf("%.0f MiB/s", br), ratio: ratio(nr, br), target: "≥ 0.95", ok: yes(nr/br >= 0.95)})
		nc, bc := median(newS.capCPU[i]), median(baseS.capCPU[i])
		b.add(row{workload: wl, metric: fmt.Sprintf("capture %s of %s output: supervisor CPU (median of %d)", parse.FormatSize(size), k.name, len(newS.capCPU[i])),
			jobs: fmt.Sprintf("%.2f s", nc.Seconds()), baseline: fmt.Sprintf("%.2f s", bc.Seconds()), ratio: ratio(nc.Seconds(), bc.Seconds())})
	}
	nc, bc := median(newS.cpu), median(baseS.cpu)
	b.add(row{workload: wl, metric: fmt.Sprintf("%d jobs × %d lines/s × %d s: supervisor CPU (median of %d)", b.cfg.concJobs, b.cfg.concRate, b.cfg.concSecs, len(newS.cpu)),
		jobs: fmt.Sprintf("%.2f s", nc.Seconds()), baseline: fmt.Sprintf("%.2f s", bc.Seconds()), ratio: ratio(nc.Seconds(), bc.Seconds()), target: "≤ 1.05", ok: yes(nc.Seconds() <= 1.05*bc.Seconds())})
	b.add(row{workload: wl, metric: "same: supervisor peak RSS (VmHWM)", jobs: fmt.Sprintf("%.1f MiB", float64(newS.rss)/1024), baseline: fmt.Sprintf("%.1f MiB", float64(baseS.rss)/1024),
		ratio: ratio(float64(newS.rss), float64(baseS.rss))})
	return nil
}

// captureOnce runs one capture of src (`cat` as a job with no output cap)
// in a fresh world of bin and returns the time from start to the end of
// `jobs wait`, and the CPU time (utime+stime) the supervisor spent in it,
// which a loaded machine disturbs less than the wall time; it checks that
// every byte was stored.
func (b *bench) captureOnce(ctx context.Context, name, bin, src string, size int64) (time.Duration, time.Duration, error) {
	w, err := b.newWorldOf(name, bin)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		w.stopSupervisor(ctx)
		os.RemoveAll(w.dir)
	}()
	if _, err := w.start("", "--ttl", "1h", "true"); err != nil { // a warm supervisor
		return 0, 0, err
	}
	sup, err := w.supervisor(ctx)
	if err != nil {
		return 0, 0, err
	}
	before, err := readStat(sup)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	id, err := w.start("", "--max-output", "0", "--ttl", "0", "--timeout", "0", "--no-stdin", "--", "cat", src)
	if err != nil {
		return 0, 0, err
	}
	if _, err := w.jobs("", "wait", id); err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	after, err := readStat(sup)
	if err != nil {
		return 0, 0, err
	}
	st, err := w.status("", id)
	if err != nil {
		return 0, 0, err
	}
	if st.OutputBytes != size || st.DroppedBytes != 0 || st.Status != string(vocab.StatusDone) {
		return 0, 0, fmt.Errorf("capture stored %d of %d bytes (%d dropped), status %s", st.OutputBytes, size, st.DroppedBytes, st.Status)
	}
	return d, after.cpu - before.cpu, nil
}
