// Command jobsbench measures jobs against its baselines on the same
// workloads, in one run on one machine, and prints a markdown table of
// medians and ratios. bench/run.sh builds it and the jobs binary and runs
// it; see bench/README.md.
//
// The binary doubles as the helper processes of the workloads (spew,
// lines, tree, sleeper), so the harness needs nothing but itself, the jobs
// binary and the baselines' tools (tsp, tmux, sh, cat, tail).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "spew":
			size, _ := strconv.ParseInt(os.Args[3], 10, 64)
			exit(spew(os.Args[2], size))
		case "lines":
			exit(lines(os.Args[2], atoi(os.Args[3], 1000), atoi(os.Args[4], 100)))
		case "tree":
			exit(tree(self(), false))
		case "tree-mid":
			exit(tree(self(), true))
		case "sleeper":
			sleeper()
			return
		case "run":
			exit(run(context.Background(), os.Args[2:]))
		}
	}
	fmt.Fprintln(os.Stderr, "usage: jobsbench run [-out FILE] [-quick]   (see bench/README.md)")
	os.Exit(2)
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobsbench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func self() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// config holds the size knobs, from the environment (see bench/README.md).
type config struct {
	jobsBin       string
	baseBin       string // a previous build to compare with (JOBS_BASE_BIN)
	baseRev       string // what baseBin was built from (JOBS_BASE_REV)
	work          string
	out           string
	quick         bool
	startRuns     int
	pollRuns      int
	captureBytes  int64
	concJobs      int
	concRate      int
	concSecs      int
	concRounds    int
	killTrials    int
	historyJobs   int             // finished jobs in the history workload's big database
	historyRuns   int             // timed runs of each verb per database
	historyExpire int             // jobs created and expired for the database-size and writer-wait targets
	historyEvents int             // events per finished job in the history databases
	only          map[string]bool // workloads to run; all when empty
}

func loadConfig(args []string) (config, error) {
	c := config{jobsBin: os.Getenv("JOBS_BIN"), work: os.Getenv("BENCH_WORK"),
		baseBin: os.Getenv("JOBS_BASE_BIN"), baseRev: os.Getenv("JOBS_BASE_REV")}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-quick", "--quick":
			c.quick = true
		case "-only", "--only":
			if i+1 < len(args) {
				c.only = map[string]bool{}
				for _, w := range strings.Split(args[i+1], ",") {
					c.only[strings.TrimSpace(w)] = true
				}
				i++
			}
		case "-out", "--out":
			if i+1 < len(args) {
				c.out = args[i+1]
				i++
			}
		default:
			return c, fmt.Errorf("unknown argument %q", args[i])
		}
	}
	if c.jobsBin == "" {
		return c, fmt.Errorf("set JOBS_BIN to the jobs binary")
	}
	// Full run by default; -quick shrinks everything for a CI smoke run.
	c.startRuns, c.pollRuns = 50, 50
	c.captureBytes = 1 << 30
	c.concJobs, c.concRate, c.concSecs, c.concRounds = 100, 100, 10, 3
	c.killTrials = 5
	// 200,000 jobs × 5 events: the million events of the history target.
	c.historyJobs, c.historyRuns, c.historyExpire, c.historyEvents = 200000, 30, 100000, 5
	if c.quick {
		c.startRuns, c.pollRuns = 15, 15
		c.captureBytes = 64 << 20
		c.concJobs, c.concSecs, c.concRounds = 20, 3, 1
		c.killTrials = 2
		c.historyJobs, c.historyRuns, c.historyExpire = 20000, 10, 10000
	}
	envInt := func(name string, p *int) {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			*p = v
		}
	}
	envInt("BENCH_START_RUNS", &c.startRuns)
	envInt("BENCH_POLL_RUNS", &c.pollRuns)
	envInt("BENCH_CONC_JOBS", &c.concJobs)
	envInt("BENCH_CONC_RATE", &c.concRate)
	envInt("BENCH_CONC_SECS", &c.concSecs)
	envInt("BENCH_CONC_ROUNDS", &c.concRounds)
	envInt("BENCH_KILL_TRIALS", &c.killTrials)
	envInt("BENCH_HISTORY_JOBS", &c.historyJobs)
	envInt("BENCH_HISTORY_RUNS", &c.historyRuns)
	envInt("BENCH_HISTORY_EXPIRE", &c.historyExpire)
	envInt("BENCH_HISTORY_EVENTS", &c.historyEvents)
	c.historyEvents = max(c.historyEvents, 3)
	if v := os.Getenv("BENCH_CAPTURE_BYTES"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return c, fmt.Errorf("BENCH_CAPTURE_BYTES: %w", err)
		}
		c.captureBytes = n
	}
	return c, nil
}

// parseSize reads 1073741824, 64MiB, 1GiB, 512KiB.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func run(ctx context.Context, args []string) error {
	cfg, err := loadConfig(args)
	if err != nil {
		return err
	}
	if cfg.work == "" {
		if cfg.work, err = os.MkdirTemp("", "jobsbench"); err != nil {
			return err
		}
		defer os.RemoveAll(cfg.work)
	}
	if cfg.jobsBin, err = filepath.Abs(cfg.jobsBin); err != nil {
		return err
	}
	if cfg.baseBin != "" {
		if cfg.baseBin, err = filepath.Abs(cfg.baseBin); err != nil {
			return err
		}
		if cfg.baseRev == "" {
			cfg.baseRev = "the previous build"
		}
	}
	b := &bench{cfg: cfg, self: self()}
	b.machine = describeMachine(cfg)
	defer b.cleanup()

	type step struct {
		name, key string
		fn        func(context.Context) error
	}
	steps := []step{
		{"start latency", "start", b.startLatency},
		{"capture", "capture", b.capture},
		{"concurrent jobs", "concurrent", b.concurrent},
		{"kill tree", "kill", b.killTree},
		{"waiting processes", "waiters", b.waiters},
		{"pty mode against pipe mode", "pty", b.ptyMode},
		{"history", "history", b.history},
		{"running side", "running", b.running},
		{"history size and expiry", "expiry", b.expiry},
	}
	if cfg.baseBin != "" {
		steps = append(steps, step{"against " + cfg.baseRev, "versus", b.versus})
	}
	for k := range cfg.only {
		if !slices.ContainsFunc(steps, func(s step) bool { return s.key == k }) {
			return fmt.Errorf("-only %s: no such workload (start, capture, concurrent, kill, waiters, pty, history, running, expiry, versus with --against)", k)
		}
	}
	if cfg.only["history"] {
		// The history workload is all three: verbs, running side, size.
		cfg.only["running"], cfg.only["expiry"] = true, true
	}
	for _, s := range steps {
		if len(cfg.only) > 0 && !cfg.only[s.key] {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		if err := s.fn(ctx); err != nil {
			b.add(row{workload: s.name, metric: "error", jobs: err.Error(), ok: "FAIL"})
			fmt.Fprintf(os.Stderr, "jobsbench: %s: %v\n", s.name, err)
		}
	}
	b.machine.loadAfter = loadavg()
	table := b.render()
	fmt.Print(table)
	if cfg.out != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	for _, r := range b.rows {
		if r.ok == "FAIL" {
			return fmt.Errorf("some targets missed (see the table)")
		}
	}
	return nil
}
