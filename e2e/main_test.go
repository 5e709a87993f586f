// Package e2e holds fault-injection and security tests that run the built
// jobs binary as users do, with real processes, real SQLite files and real
// signals. The test binary doubles as the jobs' helper processes
// (`e2e.test e2e-helper NAME ARGS…`), as os/exec's tests do.
//
// Size knobs: JOBS_E2E_FLOOD_BYTES (default 64 MiB) for the flood that the
// supervisor is killed in, JOBS_E2E_LOCK_HOLD (default 5s) for how long
// another process holds the write lock.
package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testbin"
	"github.com/agentjobs/jobs/internal/testwait"
)

// jobsBin is the jobs binary built by TestMain; helperBin is this test
// binary, run by jobs as the helper processes, or the one helperEnv names.
var jobsBin, helperBin string

// helperEnv names a build of this package's tests to run as the helper
// processes instead of the test binary itself. scripts/test.sh builds one
// without the race detector: the helpers stand in for the programs users
// run (output floods, signal traps, an embedding program), a race-built
// one costs several times the CPU (0.13 s to start against 0.03 s, 0.75 s
// to write 8 MiB of text), and the suite starts about two hundred.
const helperEnv = "JOBS_TEST_HELPER"

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "e2e-helper" {
		os.Exit(runHelper(os.Args[2], os.Args[3:]))
	}
	dir, err := os.MkdirTemp("", "jobs-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if jobsBin, err = testbin.Jobs(dir); err != nil {
		fmt.Fprintf(os.Stderr, "build jobs: %v\n", err)
		os.Exit(1)
	}
	if helperBin = os.Getenv(helperEnv); helperBin == "" {
		if helperBin, err = os.Executable(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	sharedBrowser.close()
	stopSupervisors(jobsBin)
	os.RemoveAll(dir)
	os.Exit(code)
}

// stopSupervisors ends the detached supervisors of the binary this run
// built (matched by its exact path), which would otherwise idle out later.
func stopSupervisors(bin string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if isSupervisorOf(pid, bin) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

func isSupervisorOf(pid int, bin string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(string(b), "\x00")
	return len(argv) > 1 && argv[0] == bin && argv[1] == "supervise"
}

// world is one user's jobs: own state and runtime directories, so its own
// database and supervisor.
type world struct {
	t     *testing.T
	base  string
	state string
	run   string
	scope string
	extra []string // more environment
}

func newWorld(t *testing.T) *world {
	t.Helper()
	// Short paths: unix socket paths are limited to about 100 bytes.
	base, err := os.MkdirTemp("", "je2e")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, base: base, state: filepath.Join(base, "s"), run: filepath.Join(base, "r")}
	for _, d := range []string{w.state, w.run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		w.stop()
		os.RemoveAll(base)
	})
	return w
}

func (w *world) dbPath() string { return filepath.Join(w.state, "jobs", "jobs.db") }

func (w *world) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOBS_DB", "JOBS_SCOPE", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
			"PI_BASH_YIELD_MS", "PI_BASH_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "PI_BASH_JOB_TTL_MS",
			"XDG_CONFIG_HOME", "JOBS_TIMEOUT", "JOBS_TTL", "JOBS_MAX_OUTPUT", "JOBS_SHELL":
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "XDG_STATE_HOME="+w.state, "XDG_RUNTIME_DIR="+w.run)
	// A config file of the person running the tests must not change
	// the defaults the tests expect.
	out = append(out, "XDG_CONFIG_HOME="+filepath.Join(filepath.Dir(w.state), "config"))
	if w.scope != "" {
		out = append(out, "JOBS_SCOPE="+w.scope)
	}
	return append(out, w.extra...)
}

// result is what one run of the binary gave.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	s := fmt.Sprintf("jobs %s: exit %d\nstdout: %q\nstderr: %q", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
	// A supervisor that failed to start says why in its log only.
	if m := superviseLog.FindStringSubmatch(r.stderr); m != nil {
		if b, err := os.ReadFile(m[1]); err == nil {
			s += fmt.Sprintf("\n%s (its end):\n%s", m[1], tailOf(string(b), 4096))
		}
	}
	return s
}

var superviseLog = regexp.MustCompile(`\(see (/\S+/supervise\.log)\)`)

func (w *world) cmd(args ...string) *exec.Cmd {
	c := exec.Command(jobsBin, args...)
	c.Env = w.environ()
	c.WaitDelay = time.Minute // a hang guard (a descendant holding the pipe), not a bound on speed: a loaded machine can take seconds to drain the pipe
	return c
}

// jobs runs the binary and returns what it did, whatever it did.
func (w *world) jobs(args ...string) result {
	w.t.Helper()
	c := w.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run jobs %v: %v", args, err)
	}
	return result{args: args, stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs jobs and fails the test unless it exits 0 with a quiet stderr.
func (w *world) ok(args ...string) string {
	w.t.Helper()
	r := w.jobs(args...)
	if r.code != 0 || r.stderr != "" {
		w.t.Fatalf("%v", r)
	}
	return r.stdout
}

// start starts a job and returns its id.
func (w *world) start(args ...string) string {
	w.t.Helper()
	return strings.TrimSpace(w.ok(append([]string{"start"}, args...)...))
}

// helper is the argv that runs helper name in a job.
func helper(name string, args ...string) []string {
	return append([]string{"--", helperBin, "e2e-helper", name}, args...)
}

// job is the part of the job object the tests read.
type job struct {
	ID           string   `json:"id"`
	Status       string   `json:"status"`
	ExitCode     *int     `json:"exit_code"`
	Signal       string   `json:"signal"`
	Reason       string   `json:"reason"`
	PID          int      `json:"pid"`
	Supervisor   string   `json:"supervisor"`
	EnvNames     []string `json:"env_names"`
	RuntimeMS    int64    `json:"runtime_ms"`
	TimeoutMS    int64    `json:"timeout_ms"`
	TTLMS        int64    `json:"ttl_ms"`
	OutputBytes  int64    `json:"output_bytes"`
	DroppedBytes int64    `json:"dropped_bytes"`
	Descendants  int      `json:"descendants"`
}

type event struct {
	ID     int64           `json:"id"`
	Kind   string          `json:"kind"`
	From   string          `json:"from"`
	To     string          `json:"to"`
	Detail json.RawMessage `json:"detail"`
}

// status returns the job and its history.
func (w *world) status(id string) (job, []event) {
	w.t.Helper()
	var s struct {
		Job    job     `json:"job"`
		Events []event `json:"events"`
	}
	out := w.ok("--json", "status", id)
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		w.t.Fatalf("status %s: %v\n%s", id, err, out)
	}
	return s.Job, s.Events
}

// poll returns the job as `jobs poll` sees it (poll notices dead
// supervisors).
func (w *world) poll(id string) job {
	w.t.Helper()
	var p struct {
		Job job `json:"job"`
	}
	out := w.ok("--json", "poll", id)
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		w.t.Fatalf("poll %s: %v\n%s", id, err, out)
	}
	return p.Job
}

// patience is the least any wait of these tests is given
// (testwait.Least): a bound only bounds a failure.
const patience = testwait.Least

// waitFor polls cond until it holds, failing the test after d
// (testwait.Least at least).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// sqlDB opens the world's database directly, as an auditor would.
func (w *world) sqlDB() *sql.DB {
	w.t.Helper()
	d, err := sql.Open("sqlite", db.DSN(w.dbPath()))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { d.Close() })
	return d
}

// integrity runs PRAGMA integrity_check and fails unless it says ok.
func (w *world) integrity() {
	w.t.Helper()
	d := w.sqlDB()
	var res string
	if err := d.QueryRowContext(context.Background(), `PRAGMA integrity_check`).Scan(&res); err != nil {
		w.t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		w.t.Fatalf("integrity_check: %s", res)
	}
}

// supervisorPID returns the pid of the world's live detached supervisor.
func (w *world) supervisorPID() int {
	w.t.Helper()
	var pid int
	err := w.sqlDB().QueryRowContext(context.Background(),
		`SELECT pid FROM supervisors WHERE ended_at IS NULL AND kind = 'detached' ORDER BY started_at DESC LIMIT 1`).Scan(&pid)
	if err != nil {
		w.t.Fatalf("find the supervisor: %v", err)
	}
	if !isSupervisorOf(pid, jobsBin) {
		w.t.Fatalf("pid %d is not a jobs supervisor", pid)
	}
	return pid
}

// supervisorLock returns the lock file of the supervisor with this pid.
func (w *world) supervisorLock(pid int) string {
	w.t.Helper()
	var path string
	err := w.sqlDB().QueryRowContext(context.Background(),
		`SELECT lock_path FROM supervisors WHERE pid = ? ORDER BY started_at DESC LIMIT 1`, pid).Scan(&path)
	if err != nil {
		w.t.Fatalf("find the supervisor's lock: %v", err)
	}
	return path
}

// lockFree reports whether nobody holds the flock on path.
func lockFree(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// stop ends the world's supervisors (started by this test through the CLI).
func (w *world) stop() {
	d, err := sql.Open("sqlite", db.DSN(w.dbPath()))
	if err != nil {
		return
	}
	defer d.Close()
	rows, err := d.Query(`SELECT pid FROM supervisors WHERE ended_at IS NULL`)
	if err != nil {
		return
	}
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	rows.Close()
	for _, pid := range pids {
		if isSupervisorOf(pid, jobsBin) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			deadline := time.Now().Add(patience)
			for procAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// procState returns the state letter of pid ('R', 'S', 'T', 'Z' …) and its
// start time, or ok=false when it does not exist.
func procState(pid int) (state byte, start int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, false
	}
	start, _ = strconv.ParseInt(f[19], 10, 64)
	return f[0][0], start, true
}

// procAlive: exists and is not a zombie (PID 1 may not reap here).
func procAlive(pid int) bool {
	s, _, ok := procState(pid)
	return ok && s != 'Z' && s != 'X'
}

// sameProcAlive: pid still names the process that started at start.
func sameProcAlive(pid int, start int64) bool {
	s, st, ok := procState(pid)
	return ok && st == start && s != 'Z' && s != 'X'
}

// killLeftover ends a process this test started, if it is still the same.
func killLeftover(pid int, start int64) {
	if sameProcAlive(pid, start) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func envInt64(name string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n > 0 {
		return n
	}
	return def
}
