package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// world is one user's jobs: its own state and runtime directories, so its
// own database and its own detached supervisor. Every workload gets a fresh
// one, so the supervisor's peak RSS and CPU belong to that workload alone.
type world struct {
	b     *bench
	bin   string // the jobs binary this world runs
	dir   string
	state string
	run   string
	db    string
}

func (b *bench) newWorld(name string) (*world, error) {
	return b.newWorldOf(name, b.cfg.jobsBin)
}

// newWorldOf is newWorld running another jobs binary (a previous build).
func (b *bench) newWorldOf(name, bin string) (*world, error) {
	w := &world{b: b, bin: bin, dir: filepath.Join(b.cfg.work, name)}
	w.state, w.run = filepath.Join(w.dir, "s"), filepath.Join(w.dir, "r")
	for _, d := range []string{w.state, w.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	w.db = filepath.Join(w.state, "jobs", "jobs.db")
	b.worlds = append(b.worlds, w)
	return w, nil
}

func (w *world) environ(scope string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOBS_DB", "JOBS_SCOPE", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
			"PI_BASH_YIELD_MS", "PI_BASH_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "PI_BASH_JOB_TTL_MS":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "XDG_STATE_HOME="+w.state, "XDG_RUNTIME_DIR="+w.run)
	if scope != "" {
		env = append(env, "JOBS_SCOPE="+scope)
	}
	return env
}

// cmd is the jobs binary with args in this world.
func (w *world) cmd(scope string, args ...string) *exec.Cmd {
	c := exec.Command(w.bin, args...)
	c.Env = w.environ(scope)
	return c
}

// jobs runs the jobs binary and returns its stdout; a non-zero exit is an
// error carrying stderr.
func (w *world) jobs(scope string, args ...string) ([]byte, error) {
	c := w.cmd(scope, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("jobs %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// start starts a job and returns its id.
func (w *world) start(scope string, args ...string) (string, error) {
	out, err := w.jobs(scope, append([]string{"start"}, args...)...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// jobJSON is the part of the job object the harness reads.
type jobJSON struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ExitCode     *int   `json:"exit_code"`
	PID          int    `json:"pid"`
	OutputBytes  int64  `json:"output_bytes"`
	OutputLines  int64  `json:"output_lines"`
	DroppedBytes int64  `json:"dropped_bytes"`
	EvictedBytes int64  `json:"evicted_bytes"`
}

func (w *world) status(scope, id string) (jobJSON, error) {
	out, err := w.jobs(scope, "--json", "status", id)
	if err != nil {
		return jobJSON{}, err
	}
	var s struct {
		Job jobJSON `json:"job"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return jobJSON{}, fmt.Errorf("status %s: %w", id, err)
	}
	return s.Job, nil
}

// supervisor returns the pid of the world's live detached supervisor.
func (w *world) supervisor(ctx context.Context) (int, error) {
	sqldb, err := sql.Open("sqlite", db.DSN(w.db))
	if err != nil {
		return 0, err
	}
	defer sqldb.Close()
	var pid int
	err = sqldb.QueryRowContext(ctx, `SELECT pid FROM supervisors WHERE ended_at IS NULL AND kind = 'detached' ORDER BY started_at DESC LIMIT 1`).Scan(&pid)
	if err != nil {
		return 0, fmt.Errorf("find the supervisor: %w", err)
	}
	return pid, nil
}

// stopSupervisor ends the world's supervisor (which this harness started
// through the CLI) and waits for it to go.
func (w *world) stopSupervisor(ctx context.Context) {
	pid, err := w.supervisor(ctx)
	if err != nil || pid <= 0 {
		return
	}
	if !isSupervisorOf(pid, w.bin) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	waitFor(10*time.Second, func() bool { return !alive(pid) })
}

// isSupervisorOf reports whether pid runs `bin supervise`: the harness
// signals nothing else.
func isSupervisorOf(pid int, bin string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(string(b), "\x00")
	return len(argv) > 1 && argv[0] == bin && argv[1] == "supervise"
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStat is what the harness reads from /proc/PID/stat.
type procStat struct {
	state     byte
	pgid      int
	cpu       time.Duration // utime + stime
	startTime int64
}

// clockTick is USER_HZ, 100 on every Linux the harness runs on.
const clockTick = 10 * time.Millisecond

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, starttime 22.
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	start, _ := strconv.ParseInt(f[19], 10, 64)
	pgid, _ := strconv.Atoi(f[2])
	return procStat{state: f[0][0], pgid: pgid, cpu: time.Duration(ut+st) * clockTick, startTime: start}, nil
}

// alive: the process exists and is not a zombie (PID 1 may not reap here).
func alive(pid int) bool {
	s, err := readStat(pid)
	return err == nil && s.state != 'Z' && s.state != 'X'
}

// aliveSame: pid still names the process that started at start.
func aliveSame(pid int, start int64) bool {
	s, err := readStat(pid)
	return err == nil && s.startTime == start && s.state != 'Z' && s.state != 'X'
}

// statusKB reads a "VmHWM:   1234 kB" style line of /proc/PID/status.
func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// timed runs c and returns its wall time.
func timed(c *exec.Cmd) (time.Duration, error) {
	var stderr bytes.Buffer
	c.Stderr = &stderr
	t0 := time.Now()
	err := c.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s: %v: %s", strings.Join(c.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// machine describes where the run happened.
type machine struct {
	cpu, kernel, goVersion, jobsRev string
	cpus                            int
	memGiB                          float64
	loadBefore, loadAfter           string
}

func describeMachine(cfg config) machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version(), loadBefore: loadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				_, v, _ := strings.Cut(line, ":")
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	m.memGiB = float64(statusMemKB()) / (1 << 20)
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.jobsRev = strings.TrimSpace(string(out))
	}
	return m
}

func statusMemKB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			f := strings.Fields(line)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// dbKiB is the size of the world's database: its file, the output data
// file and their WALs.
func (w *world) dbKiB() (int64, error) {
	fi, err := os.Stat(w.db)
	if err != nil {
		return 0, err
	}
	n := fi.Size()
	// The WAL, and the output data file (a flood's bytes that do not
	// compress) with its WAL.
	for _, suffix := range []string{"-wal", "-output", "-output-wal"} {
		if fi, err := os.Stat(w.db + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n >> 10, nil
}
