package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
)

// bench is one run of the harness.
type bench struct {
	cfg     config
	self    string
	machine machine
	rows    []row
	worlds  []*world
	// cleanups run at the end, last first (baseline servers, leftovers).
	cleanups []func()
}

// row is one line of the results table. ok is "yes", "no" (a performance
// target missed) or "FAIL" (a correctness check failed: lost lines,
// survivors, bytes that differ, an error).
type row struct {
	workload, metric, jobs, baseline, ratio, target, ok string
}

func (b *bench) add(r row) {
	b.rows = append(b.rows, r)
	fmt.Fprintf(os.Stderr, "   %s | %s | jobs %s | %s | %s | %s %s\n", r.workload, r.metric, r.jobs, r.baseline, r.ratio, r.target, r.ok)
}

func (b *bench) cleanup() {
	ctx := context.Background()
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	for _, w := range b.worlds {
		w.stopSupervisor(ctx)
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func pass(ok bool) string {
	if ok {
		return "yes"
	}
	return "FAIL"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func mibps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / d.Seconds()
}

func (b *bench) render() string {
	var s strings.Builder
	m := b.machine
	mode := "full"
	if b.cfg.quick {
		mode = "quick"
	}
	fmt.Fprintf(&s, "# jobs benchmark results\n\n")
	fmt.Fprintf(&s, "Run %s (%s mode) on %s: %d CPUs, %.1f GiB RAM, Linux %s, %s; jobs %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), mode, m.cpu, m.cpus, m.memGiB, m.kernel, m.goVersion, m.jobsRev)
	fmt.Fprintf(&s, "Load average (1, 5, 15 min) before the run: %s; after: %s.\n\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(&s, "Sizes: %d start runs per tool, capture %s, %d poll runs, %d jobs × %d lines/s × %d s (%d rounds), %d kill trials.\n\n",
		b.cfg.startRuns, parse.FormatSize(b.cfg.captureBytes), b.cfg.pollRuns, b.cfg.concJobs, b.cfg.concRate, b.cfg.concSecs, b.cfg.concRounds, b.cfg.killTrials)
	s.WriteString("| workload | metric | jobs | baseline | ratio | target | met |\n")
	s.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range b.rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s |\n", r.workload, r.metric, r.jobs, r.baseline, r.ratio, r.target, r.ok)
	}
	s.WriteString("\nMedians of wall time per command, measured from the harness (fork, exec and wait included for every tool alike);\n")
	s.WriteString("runs of the tools are interleaved so that background load hits them alike. Ratios are jobs / baseline.\n")
	return s.String()
}

// startLatency: `jobs start true` with a warm supervisor against tsp, tmux
// new-session -d (warm private server) and nohup … &.
func (b *bench) startLatency(ctx context.Context) error {
	w, err := b.newWorld("start")
	if err != nil {
		return err
	}
	// Warm the supervisor.
	if _, err := w.start("", "--ttl", "1m", "true"); err != nil {
		return err
	}
	type tool struct {
		name string
		cmd  func() *exec.Cmd
		ds   []time.Duration
	}
	tools := []*tool{{name: "jobs start true", cmd: func() *exec.Cmd {
		return w.cmd("", "start", "--ttl", "1m", "true")
	}}}

	// The previous build (--against), in its own world with its own warm
	// supervisor: the ratio before and after, same run.
	if b.cfg.baseBin != "" {
		bw, err := b.newWorldOf("start-base", b.cfg.baseBin)
		if err != nil {
			return err
		}
		defer bw.stopSupervisor(ctx)
		if _, err := bw.start("", "--ttl", "1m", "true"); err != nil {
			return err
		}
		tools = append(tools, &tool{name: "jobs start true (" + b.cfg.baseRev + ")", cmd: func() *exec.Cmd {
			return bw.cmd("", "start", "--ttl", "1m", "true")
		}})
	}
	// task-spooler, on a private socket.
	if tsp := findTool("tsp", "ts"); tsp != "" {
		env := append(os.Environ(), "TS_SOCKET="+w.dir+"/tsp.sock", "TMPDIR="+w.dir, "TS_MAXFINISHED=1000")
		warm := exec.Command(tsp, "true")
		warm.Env = env
		if err := warm.Run(); err == nil {
			b.cleanups = append(b.cleanups, func() {
				k := exec.Command(tsp, "-K")
				k.Env = env
				_ = k.Run()
			})
			tools = append(tools, &tool{name: "tsp true", cmd: func() *exec.Cmd {
				c := exec.Command(tsp, "true")
				c.Env = env
				return c
			}})
		}
	}
	// tmux, on a private server kept warm by a holder session.
	if tm, err := exec.LookPath("tmux"); err == nil {
		sock := fmt.Sprintf("jobsbench-%d", os.Getpid())
		hold := exec.Command(tm, "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "hold", "sleep 100000")
		if err := hold.Run(); err == nil {
			b.cleanups = append(b.cleanups, func() { _ = exec.Command(tm, "-L", sock, "kill-server").Run() })
			tools = append(tools, &tool{name: "tmux new-session -d true", cmd: func() *exec.Cmd {
				return exec.Command(tm, "-L", sock, "-f", "/dev/null", "new-session", "-d", "true")
			}})
		}
	}
	tools = append(tools, &tool{name: "nohup sh -c true &", cmd: func() *exec.Cmd {
		return exec.Command("/bin/sh", "-c", "nohup sh -c true >/dev/null 2>&1 &")
	}})

	// What any jobs command costs before it does anything: the process
	// start-up (Go runtime, package initialisation, flag parsing), against
	// programs built beside the harness that do nothing: one that links
	// the modules jobs is built on (bench/cmd/linked), the same without
	// the MCP SDK, an empty Go program (bench/cmd/noop); and true(1).
	floors := []*tool{{name: "jobs --version", cmd: func() *exec.Cmd { return exec.Command(b.cfg.jobsBin, "--version") }}}
	for _, p := range []struct{ file, name string }{
		{"linked", "a program that only links jobs' modules"},
		{"linked-nomcp", "the same without the MCP SDK"},
		{"noop", "an empty Go program"},
	} {
		if path := filepath.Join(filepath.Dir(b.self), p.file); fileExists(path) {
			floors = append(floors, &tool{name: p.name, cmd: func() *exec.Cmd { return exec.Command(path) }})
		}
	}
	floors = append(floors, &tool{name: "true", cmd: func() *exec.Cmd { return exec.Command("true") }})

	for i := 0; i < b.cfg.startRuns; i++ {
		for _, t := range append(tools, floors...) {
			d, err := timed(t.cmd())
			if err != nil {
				return err
			}
			t.ds = append(t.ds, d)
		}
	}
	jm := median(tools[0].ds)
	var tmuxMedian time.Duration
	for _, t := range tools[1:] {
		if strings.HasPrefix(t.name, "tmux") {
			tmuxMedian = median(t.ds)
		}
	}
	b.add(row{workload: "start (warm supervisor)", metric: "median latency", jobs: ms(jm), baseline: "–",
		target: "≤ 5 ms", ok: yes(jm <= 5*time.Millisecond)})
	for _, t := range tools[1:] {
		tm := median(t.ds)
		r := row{workload: "start (warm supervisor)", metric: "vs `" + t.name + "`", jobs: ms(jm), baseline: ms(tm),
			ratio: ratio(float64(jm), float64(tm))}
		if strings.HasPrefix(t.name, "tmux") {
			r.target, r.ok = "below tmux", yes(jm < tmuxMedian)
		}
		b.add(r)
	}
	fm := median(floors[0].ds)
	for _, t := range floors[1:] {
		tm := median(t.ds)
		b.add(row{workload: "start-up floor", metric: "`jobs --version` vs " + t.name, jobs: ms(fm), baseline: ms(tm),
			ratio: ratio(float64(fm), float64(tm))})
	}
	w.stopSupervisor(ctx)
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func findTool(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			// Debian's moreutils also ships a `ts` (timestamps): only take
			// a task-spooler.
			out, _ := exec.Command(p, "-h").CombinedOutput()
			if strings.Contains(strings.ToLower(string(out)), "spooler") || n == "tsp" {
				return p
			}
		}
	}
	return ""
}

// killProcs ends pids this harness started (baseline survivors).
func killProcs(pids []int, starts []int64) {
	for i, pid := range pids {
		if aliveSame(pid, starts[i]) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
