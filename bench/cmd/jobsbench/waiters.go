package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// waiters: what a process that waits costs while nothing it waits for
// happens. `jobs wait`, `jobs log -f` and `jobs events -f` wait on a job
// that prints nothing, for BENCH_WAIT_SECS (60 s; 15 s with -quick), first
// with nothing else running, then while another job floods output. The
// cost is the CPU time (user + system, from wait4's rusage) of each
// waiting process, start-up included, per minute of waiting. With
// --against REV the previous build's waiters run beside this build's, on
// the same database at the same time; `tail -f` of a quiet file is the
// floor.
func (b *bench) waiters(ctx context.Context) error {
	secs := 60
	if b.cfg.quick {
		secs = 15
	}
	if v, err := strconv.Atoi(os.Getenv("BENCH_WAIT_SECS")); err == nil && v > 0 {
		secs = v
	}
	span := time.Duration(secs) * time.Second
	w, err := b.newWorld("waiters")
	if err != nil {
		return err
	}
	defer w.stopSupervisor(ctx)
	quiet, err := w.start("", "--ttl", "1h", "--timeout", "0", "--", "sleep", "100000")
	if err != nil {
		return err
	}
	defer func() { _, _ = w.jobs("", "kill", quiet) }()
	quietFile := w.dir + "/quiet.txt"
	if err := os.WriteFile(quietFile, []byte("x\n"), 0o600); err != nil {
		return err
	}

	type builds struct{ name, bin string }
	bins := []builds{{"this build", b.cfg.jobsBin}}
	if b.cfg.baseBin != "" {
		bins = append(bins, builds{b.cfg.baseRev, b.cfg.baseBin})
	}
	type waiter struct {
		build, name string
		cmd         func() *exec.Cmd
	}
	var ws []waiter
	for _, bb := range bins {
		run := func(args ...string) func() *exec.Cmd {
			return func() *exec.Cmd {
				c := exec.Command(bb.bin, args...)
				c.Env = w.environ("")
				return c
			}
		}
		ws = append(ws,
			waiter{bb.name, "jobs wait", run("wait", "--timeout", strconv.Itoa(secs)+"s", quiet)},
			waiter{bb.name, "jobs log -f", run("log", "-f", quiet)},
			waiter{bb.name, "jobs events -f", run("events", "-f")},
		)
	}
	ws = append(ws, waiter{"floor", "tail -f of a quiet file", func() *exec.Cmd { return exec.Command("tail", "-f", quietFile) }})

	// measure runs every waiter at once for span and returns each one's
	// CPU time.
	measure := func() ([]time.Duration, error) {
		cpu := make([]time.Duration, len(ws))
		errs := make([]error, len(ws))
		var wg sync.WaitGroup
		for i, wt := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := wt.cmd()
				if err := c.Start(); err != nil {
					errs[i] = err
					return
				}
				// The wait ends itself at its timeout; the followers are
				// stopped at the same time.
				t := time.AfterFunc(span, func() { _ = c.Process.Signal(syscall.SIGTERM) })
				defer t.Stop()
				_ = c.Wait()
				if c.ProcessState == nil {
					errs[i] = fmt.Errorf("%s: no exit status", wt.name)
					return
				}
				cpu[i] = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return cpu, nil
	}
	report := func(phase string, cpu []time.Duration) {
		perMin := func(d time.Duration) float64 { return d.Seconds() * 60 / span.Seconds() }
		for i, wt := range ws {
			r := row{workload: "waiting " + phase, metric: fmt.Sprintf("`%s` CPU per minute of waiting (%s, %d s)", wt.name, wt.build, secs),
				jobs: fmt.Sprintf("%.3f s", perMin(cpu[i]))}
			if wt.build == "this build" {
				r.target, r.ok = "≤ 0.1 s", yes(perMin(cpu[i]) <= 0.1)
				for k, other := range ws {
					if other.name == wt.name && k != i {
						r.baseline = fmt.Sprintf("%.3f s (%s)", perMin(cpu[k]), other.build)
						r.ratio = ratio(cpu[i].Seconds(), cpu[k].Seconds())
					}
				}
			}
			b.add(r)
		}
	}

	// What every waiter pays before it waits at all: start-up, opening
	// the database, the first look (a wait of 1 ms), median of 5.
	for _, bb := range bins {
		var ds []time.Duration
		for range 5 {
			c := exec.Command(bb.bin, "wait", "--timeout", "1ms", quiet)
			c.Env = w.environ("")
			_ = c.Run() // exits 124, timed out
			if c.ProcessState == nil {
				return fmt.Errorf("jobs wait --timeout 1ms did not run")
			}
			ds = append(ds, c.ProcessState.UserTime()+c.ProcessState.SystemTime())
		}
		b.add(row{workload: "waiting (idle)", metric: fmt.Sprintf("of which start-up and first look: `jobs wait --timeout 1ms` CPU (%s, median of 5)", bb.name),
			jobs: fmt.Sprintf("%.3f s", median(ds).Seconds())})
	}
	fmt.Fprintf(os.Stderr, "   idle, %d s\n", secs)
	cpu, err := measure()
	if err != nil {
		return err
	}
	report("(idle)", cpu)

	// The flood: text lines as fast as the supervisor takes them, for as
	// long as the waiters wait.
	flood, err := w.start("", "--ttl", "1h", "--timeout", "0", "--no-stdin", "--", "yes", "a line of a build log, as long as many are, with a path/to/some/file.go:123 in it")
	if err != nil {
		return err
	}
	defer func() { _, _ = w.jobs("", "kill", flood) }()
	fmt.Fprintf(os.Stderr, "   during a flood, %d s\n", secs)
	if cpu, err = measure(); err != nil {
		return err
	}
	report("(another job floods)", cpu)
	return nil
}
