package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The helper processes the workloads run as jobs (and as baselines). The
// driver binary doubles as them, so the harness needs nothing but itself,
// the jobs binary and the baselines' own tools.

// spew writes size pseudo-random bytes to path: incompressible, all 256
// byte values, NULs and invalid UTF-8 included.
func spew(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.NewChaCha8([32]byte{'j', 'o', 'b', 's'})
	if _, err := io.CopyN(w, rng, size); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lines prints n numbered lines at rate lines a second, paced against the
// start time so that a slow write is caught up, never skipped. Each line is
// "<tag> <seq>\n" with seq from 0.
func lines(tag string, n, rate int) error {
	w := bufio.NewWriter(os.Stdout)
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			time.Sleep(d) // pacing the workload, not waiting for a condition
		}
		fmt.Fprintf(w, "%s %06d\n", tag, i)
	}
	return w.Flush()
}

// tree starts a process tree and prints "pid N" for every process in it,
// then sleeps until killed:
//
//	tree ─┬─ sleeper
//	      ├─ sleeper (setsid: left the group and the session)
//	      └─ mid ─┬─ sleeper
//	              └─ sleeper (setsid)
func tree(self string, mid bool) error {
	fmt.Printf("pid %d\n", os.Getpid())
	spawn := func(arg string, setsid bool) error {
		c := exec.Command(self, arg)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if setsid {
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		return c.Start()
	}
	if err := spawn("sleeper", false); err != nil {
		return err
	}
	if err := spawn("sleeper", true); err != nil {
		return err
	}
	if !mid {
		if err := spawn("tree-mid", false); err != nil {
			return err
		}
	}
	os.Stdout.Sync()
	idle()
	return nil
}

func sleeper() {
	fmt.Printf("pid %d\n", os.Getpid())
	idle()
}

// idle blocks until the process is killed.
func idle() {
	for {
		time.Sleep(time.Hour)
	}
}

func atoi(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
