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
// one scope may run at most 50 jobs. The workload runs concRounds times,
// each with a fresh database and supervisor, and the table shows the
// median CPU (CPU time on a shared machine moves with the other work on it)
// with every round's figure, the lines lost in all rounds and the highest
// RSS.
func (b *bench) concurrent(ctx context.Context) error {
	var rs []concRound
	for i := 0; i < b.cfg.concRounds; i++ {
		r, err := b.concurrentRound(ctx, "conc"+strconv.Itoa(i), b.cfg.jobsBin)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	n := b.cfg.concRate * b.cfg.concSecs * b.cfg.concJobs
	var lost, bad int
	var peak int64
	var cpus, starts []time.Duration
	var wall time.Duration
	for _, r := range rs {
		lost, bad, peak = lost+r.lost, bad+r.bad, max(peak, r.peakKB)
		cpus, starts = append(cpus, r.cpu), append(starts, r.startAll)
		wall += r.wall
	}
	each := make([]string, len(cpus))
	for i, c := range cpus {
		each[i] = fmt.Sprintf("%.2f", c.Seconds())
	}
	cpu, startAll := median(cpus), median(starts)
	wl := fmt.Sprintf("%d jobs × %d lines/s × %d s", b.cfg.concJobs, b.cfg.concRate, b.cfg.concSecs)
	rounds := ""
	if len(rs) > 1 {
		rounds = fmt.Sprintf(", median of %d rounds (%s s)", len(rs), strings.Join(each, ", "))
	}
	b.add(row{workload: wl, metric: "lines lost (count and sequence per job via `jobs log`)", jobs: fmt.Sprintf("%d of %d (%d out of order)", lost, n*len(rs), bad),
		target: "0", ok: pass(lost == 0 && bad == 0)})
	b.add(row{workload: wl, metric: "supervisor CPU (utime+stime, starts included" + rounds + ")", jobs: fmt.Sprintf("%.2f s", cpu.Seconds()),
		baseline: fmt.Sprintf("%.2f s of jobs' wall time", (wall / time.Duration(len(rs))).Seconds()), target: "≤ 1 s", ok: yes(cpu <= time.Second)})
	b.add(row{workload: wl, metric: "supervisor peak RSS (VmHWM)", jobs: fmt.Sprintf("%.1f MiB", float64(peak)/1024), target: "≤ 64 MiB", ok: yes(peak > 0 && peak <= 64*1024)})
	b.add(row{workload: wl, metric: "time to start all jobs (CLI, one by one)", jobs: fmt.Sprintf("%.2f s", startAll.Seconds())})
	return nil
}

// concRound is what one round of the concurrent workload measured.
type concRound struct {
	lost, bad int
	cpu, wall time.Duration
	startAll  time.Duration
	peakKB    int64
}

// concurrentRound runs the workload once in a fresh world of the given jobs
// binary.
func (b *bench) concurrentRound(ctx context.Context, name, bin string) (concRound, error) {
	var r concRound
	w, err := b.newWorldOf(name, bin)
	if err != nil {
		return r, err
	}
	if _, err := w.start("s0", "--ttl", "1h", "true"); err != nil {
		return r, err
	}
	sup, err := w.supervisor(ctx)
	if err != nil {
		return r, err
	}
	before, err := readStat(sup)
	if err != nil {
		return r, err
	}
	n := b.cfg.concRate * b.cfg.concSecs
	type job struct{ scope, id, tag string }
	var jobs []job
	t0 := time.Now()
	for i := 0; i < b.cfg.concJobs; i++ {
		j := job{scope: "s" + strconv.Itoa(i/25), tag: fmt.Sprintf("j%03d", i)}
		j.id, err = w.start(j.scope, "--ttl", "1h", "--no-stdin", "--", b.self, "lines", j.tag, strconv.Itoa(n), strconv.Itoa(b.cfg.concRate))
		if err != nil {
			return r, err
		}
		jobs = append(jobs, j)
	}
	r.startAll = time.Since(t0)
	for _, j := range jobs {
		if _, err := w.jobs(j.scope, "wait", j.id); err != nil {
			return r, err
		}
	}
	after, err := readStat(sup)
	if err != nil {
		return r, err
	}
	r.peakKB = statusKB(sup, "VmHWM")
	r.wall = time.Since(t0)

	for _, j := range jobs {
		out, err := w.jobs(j.scope, "log", j.id, "--offset", "0", "--limit", strconv.Itoa(pageBytes))
		if err != nil {
			return r, err
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
				r.bad++
				continue
			}
			next++
		}
		r.lost += n - next
	}
	r.cpu = after.cpu - before.cpu
	w.stopSupervisor(ctx)
	return r, nil
}
