package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// concurrent: concJobs jobs, each printing concRate numbered lines a second
// for concSecs seconds, all at once. Every line must come back, in order;
// the supervisor's CPU time (utime+stime) and peak RSS over the workload
// are reported. The jobs are spread over scopes of 25, as agents would be:
// one scope may run at most 50 jobs.
func (b *bench) concurrent(ctx context.Context) error {
	w, err := b.newWorld("conc")
	if err != nil {
		return err
	}
	if _, err := w.start("s0", "--ttl", "1h", "true"); err != nil {
		return err
	}
	sup, err := w.supervisor(ctx)
	if err != nil {
		return err
	}
	before, err := readStat(sup)
	if err != nil {
		return err
	}
	n := b.cfg.concRate * b.cfg.concSecs
	type job struct{ scope, id, tag string }
	var jobs []job
	t0 := time.Now()
	for i := 0; i < b.cfg.concJobs; i++ {
		j := job{scope: "s" + strconv.Itoa(i/25), tag: fmt.Sprintf("j%03d", i)}
		j.id, err = w.start(j.scope, "--ttl", "1h", "--no-stdin", "--", b.self, "lines", j.tag, strconv.Itoa(n), strconv.Itoa(b.cfg.concRate))
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	startAll := time.Since(t0)
	for _, j := range jobs {
		if _, err := w.jobs(j.scope, "wait", j.id); err != nil {
			return err
		}
	}
	after, err := readStat(sup)
	if err != nil {
		return err
	}
	peak := statusKB(sup, "VmHWM")

	lost, bad := 0, 0
	for _, j := range jobs {
		out, err := w.jobs(j.scope, "log", j.id, "--offset", "0", "--limit", strconv.Itoa(pageBytes))
		if err != nil {
			return err
		}
		got := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		next := 0
		for _, l := range got {
			if len(l) == 0 {
				continue
			}
			tag, seq, ok := strings.Cut(string(l), " ")
			k, err := strconv.Atoi(seq)
			if !ok || tag != j.tag || err != nil || k != next {
				bad++
				continue
			}
			next++
		}
		lost += n - next
	}
	cpu := after.cpu - before.cpu
	wl := fmt.Sprintf("%d jobs × %d lines/s × %d s", b.cfg.concJobs, b.cfg.concRate, b.cfg.concSecs)
	b.add(row{workload: wl, metric: "lines lost (count and sequence per job via `jobs log`)", jobs: fmt.Sprintf("%d of %d (%d out of order)", lost, n*len(jobs), bad),
		target: "0", ok: pass(lost == 0 && bad == 0)})
	b.add(row{workload: wl, metric: "supervisor CPU (utime+stime, starts included)", jobs: fmt.Sprintf("%.2f s", cpu.Seconds()),
		baseline: fmt.Sprintf("%.2f s of jobs' wall time", time.Since(t0).Seconds()), target: "≤ 1 s", ok: yes(cpu <= time.Second)})
	b.add(row{workload: wl, metric: "supervisor peak RSS (VmHWM)", jobs: fmt.Sprintf("%.1f MiB", float64(peak)/1024), target: "≤ 64 MiB", ok: yes(peak > 0 && peak <= 64*1024)})
	b.add(row{workload: wl, metric: "time to start all jobs (CLI, one by one)", jobs: fmt.Sprintf("%.2f s", startAll.Seconds())})
	w.stopSupervisor(ctx)
	return nil
}
