package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/vocab"
)

// ptyMode: the pty mode against pipe mode, in the same run and the same
// kind of world:
//
//   - throughput: a job that cats a text file of 100-byte lines, start to
//     done, the bytes stored checked (a terminal stores each \n as \r\n);
//   - per-job cost: short jobs (`echo hi`) one after another, the median
//     start-to-done time and the supervisor's CPU per job;
//   - a trickle: jobs printing lines at a steady rate at once, the
//     supervisor's CPU over the workload.
func (b *bench) ptyMode(ctx context.Context) error {
	size := min(b.cfg.captureBytes/4, 256<<20)
	if v := os.Getenv("BENCH_PTY_BYTES"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("BENCH_PTY_BYTES: %w", err)
		}
		size = n
	}
	const lineLen = 100
	size -= size % lineLen
	nLines := size / lineLen
	w, err := b.newWorld("pty")
	if err != nil {
		return err
	}
	src := filepath.Join(w.dir, "text.txt")
	if err := textFile(src, nLines, lineLen); err != nil {
		return err
	}
	if _, err := w.start("", "--ttl", "1h", "true"); err != nil {
		return err
	}
	sup, err := w.supervisor(ctx)
	if err != nil {
		return err
	}
	defer w.stopSupervisor(ctx)

	// Throughput.
	modes := []struct {
		name  string
		flags []string
		want  int64
	}{
		{"pipe", []string{"--no-stdin"}, size},
		{"pty", []string{"--pty"}, size + nLines},
	}
	var rates [2]float64
	wl := "pty vs pipe, " + parse.FormatSize(size) + " of text"
	for i, m := range modes {
		t0 := time.Now()
		args := append([]string{"--max-output", "0", "--ttl", "1h", "--timeout", "0"}, m.flags...)
		id, err := w.start("", append(args, "--", "cat", src)...)
		if err != nil {
			return err
		}
		if _, err := w.jobs("", "wait", id); err != nil {
			return err
		}
		d := time.Since(t0)
		st, err := w.status("", id)
		if err != nil {
			return err
		}
		rates[i] = mibps(size, d)
		b.add(row{workload: wl, metric: m.name + " mode: throughput, bytes stored", jobs: fmt.Sprintf("%.0f MiB/s, %d B", rates[i], st.OutputBytes),
			target: fmt.Sprintf("%d B, done", m.want), ok: pass(st.OutputBytes == m.want && st.Status == string(vocab.StatusDone))})
	}
	b.add(row{workload: wl, metric: "throughput: pty / pipe", jobs: fmt.Sprintf("%.0f MiB/s", rates[1]), baseline: fmt.Sprintf("%.0f MiB/s", rates[0]), ratio: ratio(rates[1], rates[0])})
	os.Remove(src)

	// Per-job cost.
	runs := b.cfg.startRuns
	var lat [2]time.Duration
	var cpu [2]time.Duration
	for i, m := range modes {
		var ds []time.Duration
		before, err := readStat(sup)
		if err != nil {
			return err
		}
		for range runs {
			t0 := time.Now()
			id, err := w.start("", append(append([]string{"--ttl", "1h"}, m.flags...), "echo hi")...)
			if err != nil {
				return err
			}
			if _, err := w.jobs("", "wait", id); err != nil {
				return err
			}
			ds = append(ds, time.Since(t0))
		}
		after, err := readStat(sup)
		if err != nil {
			return err
		}
		lat[i], cpu[i] = median(ds), (after.cpu-before.cpu)/time.Duration(runs)
	}
	wl = fmt.Sprintf("pty vs pipe, %d short jobs each", runs)
	b.add(row{workload: wl, metric: "start → done (`jobs start` + `jobs wait`), median", jobs: "pty " + ms(lat[1]), baseline: "pipe " + ms(lat[0]),
		ratio: ratio(float64(lat[1]), float64(lat[0]))})
	b.add(row{workload: wl, metric: "supervisor CPU per job (utime+stime, 10 ms ticks)", jobs: "pty " + ms(cpu[1]), baseline: "pipe " + ms(cpu[0])})

	// A trickle.
	jobsN, rate, secs := max(b.cfg.concJobs/4, 5), b.cfg.concRate, b.cfg.concSecs
	for i, m := range modes {
		before, err := readStat(sup)
		if err != nil {
			return err
		}
		var ids []string
		for k := range jobsN {
			id, err := w.start("", append(append([]string{"--ttl", "1h"}, m.flags...), "--", b.self, "lines", fmt.Sprintf("t%03d", k), strconv.Itoa(rate*secs), strconv.Itoa(rate))...)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		lost := 0
		for _, id := range ids {
			if _, err := w.jobs("", "wait", id); err != nil {
				return err
			}
			out, err := w.jobs("", "log", id, "--offset", "0", "--limit", strconv.Itoa(pageBytes))
			if err != nil {
				return err
			}
			lost += rate*secs - strings.Count(string(out), "\n")
		}
		after, err := readStat(sup)
		if err != nil {
			return err
		}
		cpu[i] = after.cpu - before.cpu
		if lost != 0 {
			b.add(row{workload: "pty vs pipe, trickle", metric: m.name + " mode: lines lost", jobs: strconv.Itoa(lost), target: "0", ok: "FAIL"})
		}
	}
	b.add(row{workload: fmt.Sprintf("pty vs pipe, %d jobs × %d lines/s × %d s", jobsN, rate, secs), metric: "supervisor CPU over the workload",
		jobs: fmt.Sprintf("pty %.2f s", cpu[1].Seconds()), baseline: fmt.Sprintf("pipe %.2f s", cpu[0].Seconds()), ratio: ratio(float64(cpu[1]), float64(cpu[0]))})
	return nil
}

// textFile writes n lines of length bytes each, newline included.
func textFile(path string, n, length int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("abcdefghij", int(length/10)+1)
	for i := range n {
		head := strconv.FormatInt(i, 10) + " "
		w.WriteString(head)
		w.WriteString(pad[:length-1-int64(len(head))])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
