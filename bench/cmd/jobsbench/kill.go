package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// treeProcs is how many processes `jobsbench tree` makes (see tree).
const treeProcs = 6

// killTree: a job whose tree has grandchildren, two of them setsid'd out of
// the group and session, is killed with `jobs kill`; every pid must be gone.
// The baseline is what a nohup user does: kill the process group (TERM,
// then KILL), which leaves the setsid'd processes running.
func (b *bench) killTree(ctx context.Context) error {
	w, err := b.newWorld("kill")
	if err != nil {
		return err
	}
	var killD []time.Duration
	survivors, total := 0, 0
	for i := 0; i < b.cfg.killTrials; i++ {
		id, err := w.start("", "--ttl", "1h", "--no-stdin", "--", b.self, "tree")
		if err != nil {
			return err
		}
		var pids []int
		if !waitFor(20*time.Second, func() bool {
			out, err := w.jobs("", "log", id, "--offset", "0", "--limit", "65536")
			if err != nil {
				return false
			}
			pids = parsePids(string(out))
			return len(pids) == treeProcs
		}) {
			return fmt.Errorf("tree job %s printed %d of %d pids", id, len(pids), treeProcs)
		}
		starts := make([]int64, len(pids))
		for k, p := range pids {
			if s, err := readStat(p); err == nil {
				starts[k] = s.startTime
			}
		}
		d, err := timed(w.cmd("", "kill", id, "--grace", "2s"))
		if err != nil {
			return err
		}
		killD = append(killD, d)
		total += len(pids)
		for k, p := range pids {
			if aliveSame(p, starts[k]) {
				survivors++
			}
		}
		killProcs(pids, starts) // leave nothing behind, whatever happened
	}

	// Baseline: the same tree from nohup, ended by its process group.
	baseSurv, baseTotal := 0, 0
	var baseD []time.Duration
	for i := 0; i < b.cfg.killTrials; i++ {
		c := exec.Command(b.self, "tree")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := c.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		sc := bufio.NewScanner(out)
		var pids []int
		for len(pids) < treeProcs && sc.Scan() {
			pids = append(pids, parsePids(sc.Text())...)
		}
		starts := make([]int64, len(pids))
		for k, p := range pids {
			if s, err := readStat(p); err == nil {
				starts[k] = s.startTime
			}
		}
		t0 := time.Now()
		pg := c.Process.Pid
		_ = syscall.Kill(-pg, syscall.SIGTERM)
		waitFor(2*time.Second, func() bool { return !alive(pg) })
		_ = syscall.Kill(-pg, syscall.SIGKILL)
		_ = c.Wait()
		// Let the SIGKILL land on every member of the group before
		// counting: only the processes that left it should remain.
		waitFor(2*time.Second, func() bool {
			for k, p := range pids {
				if s, err := readStat(p); err == nil && s.pgid == pg && aliveSame(p, starts[k]) {
					return false
				}
			}
			return true
		})
		baseD = append(baseD, time.Since(t0))
		baseTotal += len(pids)
		for k, p := range pids {
			if aliveSame(p, starts[k]) {
				baseSurv++
			}
		}
		killProcs(pids, starts)
	}
	wl := fmt.Sprintf("kill tree (%d procs, 2 setsid'd) × %d", treeProcs, b.cfg.killTrials)
	b.add(row{workload: wl, metric: "survivors: `jobs kill` vs `kill -TERM -PGID` (nohup)", jobs: fmt.Sprintf("%d of %d", survivors, total),
		baseline: fmt.Sprintf("%d of %d", baseSurv, baseTotal), target: "0", ok: pass(survivors == 0 && total == treeProcs*b.cfg.killTrials)})
	b.add(row{workload: wl, metric: "median kill time", jobs: ms(median(killD)), baseline: ms(median(baseD)),
		ratio: ratio(float64(median(killD)), float64(median(baseD)))})
	w.stopSupervisor(ctx)
	return nil
}

func parsePids(s string) []int {
	var pids []int
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "pid "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}
