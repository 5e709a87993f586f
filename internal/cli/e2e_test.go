package cli

import (
	"bytes"
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

	"github.com/agentjobs/jobs/internal/testbin"
	"github.com/agentjobs/jobs/internal/testwait"
)

// jobsBin is the jobs binary built once by TestMain for the end-to-end
// tests (or linked from $JOBS_TEST_BINARY: internal/testbin).
var jobsBin string

func TestMain(m *testing.M) {
	flag := os.Getenv("JOBS_CLI_SKIP_E2E") == ""
	dir, err := os.MkdirTemp("", "jobs-cli-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if flag {
		if jobsBin, err = testbin.Jobs(dir); err != nil {
			fmt.Fprintln(os.Stderr, "build jobs:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stopSupervisors(jobsBin)
	os.RemoveAll(dir)
	os.Exit(code)
}

// stopSupervisors ends the detached supervisors started by this test
// binary's jobs (they would otherwise idle out after a minute). It matches
// the exact path of the binary built for this run, nothing broader.
func stopSupervisors(bin string) {
	if bin == "" {
		return
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(cmdline), "\x00")
		if len(argv) > 1 && argv[0] == bin && argv[1] == "supervise" || len(argv) > 2 && argv[0] == bin && contains(argv, "supervise") {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

func contains(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

// env is one user's world: its own state and runtime directories, so its
// own database and supervisor.
type env struct {
	t     *testing.T
	state string
	run   string
	scope string
	extra []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if jobsBin == "" {
		t.Skip("JOBS_CLI_SKIP_E2E is set")
	}
	// Short paths: unix socket paths are limited to about 100 bytes.
	base, err := os.MkdirTemp("", "je")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := &env{t: t, state: filepath.Join(base, "s"), run: filepath.Join(base, "r")}
	for _, d := range []string{e.state, e.run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Leave nothing running behind a test.
		e.run2("kill", "--all", "--grace", "100ms")
	})
	return e
}

// result is what one run of the binary gave.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("jobs %s: exit %d\nstdout: %q\nstderr: %q", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JOBS_DB", "JOBS_SCOPE", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "NO_COLOR",
			"PI_BASH_YIELD_MS", "PI_BASH_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "PI_BASH_JOB_TTL_MS",
			"XDG_CONFIG_HOME", "JOBS_TIMEOUT", "JOBS_TTL", "JOBS_MAX_OUTPUT", "JOBS_SHELL":
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "XDG_STATE_HOME="+e.state, "XDG_RUNTIME_DIR="+e.run)
	// A config file of the person running the tests must not change
	// the defaults the tests expect.
	out = append(out, "XDG_CONFIG_HOME="+filepath.Join(filepath.Dir(e.state), "config"))
	if e.scope != "" {
		out = append(out, "JOBS_SCOPE="+e.scope)
	}
	return append(out, e.extra...)
}

// run2 runs jobs with args and returns what it did, whatever it did.
func (e *env) run2(args ...string) result {
	return e.runIn(nil, args...)
}

func (e *env) runIn(stdin []byte, args ...string) result {
	cmd := exec.Command(jobsBin, args...)
	cmd.Env = e.environ()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run jobs %v: %v", args, err)
	}
	return result{args: args, stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs jobs and fails the test unless it exits 0 with nothing on
// stderr.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.run2(args...)
	if r.code != 0 || r.stderr != "" {
		e.t.Fatalf("want exit 0 and nothing on stderr\n%v", r)
	}
	return r.stdout
}

// read runs a read that may report on stderr what it left out: exit 0,
// and stderr empty or that one bracketed note.
func (e *env) read(args ...string) string {
	e.t.Helper()
	r := e.run2(args...)
	if r.code != 0 || r.stderr != "" && (strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "[") || !strings.HasSuffix(r.stderr, "]\n")) {
		e.t.Fatalf("want exit 0 and at most a note of what the read left out\n%v", r)
	}
	return r.stdout
}

// fails runs jobs and checks the exit status and the one-line error.
func (e *env) fails(code int, want string, args ...string) result {
	e.t.Helper()
	r := e.run2(args...)
	checkError(e.t, r, code, want)
	return r
}

func checkError(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\n%v", r.code, code, r)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ") {
		t.Errorf("stderr is not one 'jobs: ' line\n%v", r)
	}
	if want != "" && !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q\n%v", want, r)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stack trace\n%v", r)
	}
}

// start starts a job and returns its id.
func (e *env) start(args ...string) string {
	e.t.Helper()
	out := e.ok(append([]string{"start"}, args...)...)
	id := strings.TrimSpace(out)
	if !regexp.MustCompile(`^[a-z0-9]{8,}$`).MatchString(id) {
		e.t.Fatalf("start printed %q, not an id", out)
	}
	return id
}

// jsonOf runs jobs --json and decodes stdout into v.
func (e *env) jsonOf(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("jobs --json %v: %v\n%s", args, err, out)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

type jobJSON struct {
	ID              string  `json:"id"`
	Scope           string  `json:"scope"`
	Name            string  `json:"name"`
	Status          string  `json:"status"`
	ExitCode        *int    `json:"exit_code"`
	Signal          string  `json:"signal"`
	Reason          string  `json:"reason"`
	PID             int     `json:"pid"`
	PGID            int     `json:"pgid"`
	Stdin           string  `json:"stdin"`
	OutputBytes     int64   `json:"output_bytes"`
	WaitingForInput bool    `json:"waiting_for_input"`
	EndedAt         *string `json:"ended_at"`
}

type outputJSON struct {
	ID            string `json:"id"`
	Output        string `json:"output"`
	Start         int64  `json:"start"`
	End           int64  `json:"end"`
	NextOffset    int64  `json:"next_offset"`
	TotalBytes    int64  `json:"total_bytes"`
	OmittedBefore int64  `json:"omitted_before"`
}

type pollJSON struct {
	Job     jobJSON    `json:"job"`
	Output  outputJSON `json:"output"`
	RetryIn int64      `json:"retry_in_ms"`
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"start"}, "missing command"},
		{[]string{"start", "--bogus", "true"}, "unknown flag --bogus"},
		{[]string{"start", "echo", "hi"}, "put '--' before"},
		{[]string{"start", "--", ""}, "empty"},
		{[]string{"start", "   "}, "empty command"},
		{[]string{"start", "--timeout", "5x", "true"}, "invalid duration"},
		{[]string{"start", "--timeout", "-1s", "true"}, "negative"},
		{[]string{"start", "--yield", "10", "true"}, "missing unit"},
		{[]string{"start", "--max-output", "lots", "true"}, "invalid size"},
		{[]string{"start", "--env", "NOEQUALS", "true"}, "NAME=value"},
		{[]string{"start", "--wait", "--yield", "1s", "true"}, "not both"},
		{[]string{"poll"}, "missing job id"},
		{[]string{"poll", "a", "b"}, "too many arguments"},
		{[]string{"poll", "abcd", "--tail", "x"}, `invalid value "x" for --tail`},
		{[]string{"poll", "abcd", "--grep", "("}, "invalid regular expression"},
		{[]string{"log", "abcd", "--offset", "-1"}, "must not be negative"},
		{[]string{"log", "abcd", "--limit", "-5"}, "must not be negative"},
		{[]string{"log", "abcd", "--limit", "1x"}, `unknown unit "x"`},
		{[]string{"log", "abcd", "--limit", "1GiB"}, "--limit 1GiB is more than the 16 MiB a read may return"},
		{[]string{"log", "abcd", "--stream", "stdin"}, "invalid --stream"},
		{[]string{"log", "abcd", "--offset", "0", "--tail", "3"}, "one selection"},
		{[]string{"write", "abcd"}, "missing DATA"},
		{[]string{"kill"}, "missing job id"},
		{[]string{"kill", "abcd", "--signal", "NOPE"}, `unknown signal "NOPE"`},
		{[]string{"kill", "abcd", "--all"}, "not both"},
		{[]string{"kill", "abcd", "--grace", "soon"}, "invalid duration"},
		{[]string{"wait"}, "missing job id"},
		{[]string{"wait", "abcd", "--until", "[a-"}, "invalid regular expression"},
		{[]string{"wait", "abcd", "--idle", "-3s"}, "negative"},
		{[]string{"list", "--status", "sleeping"}, `unknown status "sleeping"`},
		{[]string{"events", "--since", "yesterday"}, "invalid --since"},
		{[]string{"send-keys", "abcd"}, "missing KEYS"},
		{[]string{"capture", "abcd", "--lines", "-2"}, "must not be negative"},
		{[]string{"supervise", "--idle", "forever"}, "invalid duration"},
		{[]string{"help", "frob"}, "not a command"},
	} {
		r := e.run2(tc.args...)
		checkError(t, r, ExitUsage, tc.want)
		if r.stdout != "" {
			t.Errorf("usage error printed on stdout\n%v", r)
		}
	}
	// Usage errors are found before anything is touched: no database.
	if _, err := os.Stat(filepath.Join(e.state, "jobs", "jobs.db")); err == nil {
		t.Errorf("a usage error created the database")
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := e.ok("help")
	for _, verb := range []string{"start", "poll", "log", "write", "kill", "list", "status", "wait", "events",
		"clear", "rm", "gc", "capture", "send-keys", "attach", "mcp", "supervise"} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(verb) + `\s`).MatchString(out) {
			t.Errorf("jobs help does not list %s", verb)
		}
	}
	golden(t, "help_start.golden", e.ok("help", "start"))
	if v := e.ok("--version"); !strings.HasPrefix(v, "jobs version ") {
		t.Errorf("jobs --version = %q", v)
	}
	// -v is no version flag: verbs may have it.
	if r := e.run2("-v"); r.code != 2 {
		t.Errorf("jobs -v: exit %d, want 2 (usage)", r.code)
	}
}

func TestJobLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("--name", "greeter", "read name; echo \"hello $name\"; echo bye >&2; exit 3")

	var p pollJSON
	e.jsonOf(&p, "poll", id)
	if p.Job.ID != id || p.Job.Status != "running" || p.Job.Name != "greeter" || p.Job.Stdin != "pipe" {
		t.Fatalf("poll after start: %+v", p.Job)
	}
	if human := e.ok("poll", "greeter"); !strings.Contains(human, id) || !strings.Contains(human, "running") {
		t.Errorf("poll by name:\n%s", human)
	}
	if list := e.ok("list"); !strings.Contains(list, id) || !strings.Contains(list, "greeter") {
		t.Errorf("list:\n%s", list)
	}

	e.ok("write", id[:6], "world", "--newline")
	r := e.run2("wait", id, "--timeout", "20s")
	if r.code != 3 {
		t.Fatalf("wait exit %d, want the job's 3\n%v", r.code, r)
	}
	if !strings.Contains(r.stdout, "failed (exit 3)") {
		t.Errorf("wait says %q", r.stdout)
	}

	if out := e.ok("log", id, "--stream", "stdout"); out != "hello world\n" {
		t.Errorf("log --stream stdout = %q", out)
	}
	if out := e.ok("log", id, "--stream", "stderr"); out != "bye\n" {
		t.Errorf("log --stream stderr = %q", out)
	}
	// stdout and stderr are separate pipes: their order in the combined
	// output is not fixed, so compare reads with the whole log.
	all := e.ok("log", id, "--offset", "0")
	if len(all) != len("hello world\nbye\n") {
		t.Fatalf("whole log = %q", all)
	}
	if out := e.read("log", id, "--offset", "0", "--limit", "5"); out != all[:5] {
		t.Errorf("log --offset 0 --limit 5 = %q, want %q", out, all[:5])
	}
	if out := e.read("log", id, "--offset", "3", "--limit", "100"); out != all[3:] {
		t.Errorf("log --offset 3 = %q, want %q", out, all[3:])
	}
	// A size as --max-output takes one.
	if out := e.read("log", id, "--offset", "2", "--limit", "0.01KiB"); out != all[2:12] {
		t.Errorf("log --offset 2 --limit 0.01KiB = %q, want %q (10 bytes)", out, all[2:12])
	}
	var o outputJSON
	e.jsonOf(&o, "log", id, "--from-line", "2", "--lines", "1")
	if want := strings.SplitAfter(all, "\n")[1]; o.Output != want {
		t.Errorf("log --from-line 2 --lines 1 = %q, want %q (lines count from 1)", o.Output, want)
	}
	if out := e.read("log", id, "--tail", "1"); out != strings.SplitAfter(all, "\n")[1] {
		t.Errorf("log --tail 1 = %q", out)
	}

	var st struct {
		Job    jobJSON `json:"job"`
		Events []struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"events"`
	}
	e.jsonOf(&st, "status", id)
	if st.Job.Status != "failed" || st.Job.ExitCode == nil || *st.Job.ExitCode != 3 || st.Job.EndedAt == nil {
		t.Errorf("status: %+v", st.Job)
	}
	var path []string
	for _, ev := range st.Events {
		if ev.Kind == "transition" {
			path = append(path, ev.To)
		}
	}
	if got := strings.Join(path, ">"); !strings.HasSuffix(got, "running>failed") {
		t.Errorf("history %s, want …running>failed", got)
	}
	if human := e.ok("status", id); !strings.Contains(human, "history") || !strings.Contains(human, "running → failed") {
		t.Errorf("status:\n%s", human)
	}

	e.fails(ExitError, "", "write", id, "late")

	if out := e.ok("rm", id); !strings.Contains(out, "removed "+id) {
		t.Errorf("rm said %q", out)
	}
	e.fails(ExitError, "not found", "poll", id)
	// Events outlive the job.
	evs := e.ok("events")
	if !strings.Contains(evs, id) {
		t.Errorf("events lost the removed job:\n%s", evs)
	}
	for _, line := range strings.Split(strings.TrimSpace(evs), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("events line is not JSON: %q", line)
		}
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fails(ExitError, "not found", "poll", "zzzzzzzz")
	e.fails(ExitError, "not found", "status", "nosuchname")

	// A prefix must be unique and at least 4 characters: two random ids
	// practically never share 4, so an ambiguous prefix cannot be made
	// here (errorLine's hint for it is unit-tested); a 1-character prefix
	// shared by nothing or by several jobs is refused with one line.
	a := e.start("--ttl", "1m", "true")
	e.start("--ttl", "1m", "true")
	e.fails(ExitError, "", "poll", a[:1])
	if out := e.ok("poll", a[:4]); !strings.Contains(out, a) {
		t.Errorf("poll by a 4-character prefix:\n%s", out)
	}

	// Another scope's job answers like a job that does not exist.
	other := &env{t: t, state: e.state, run: e.run, scope: "other"}
	oid := other.start("sleep 300")
	for _, args := range [][]string{
		{"poll", oid}, {"log", oid}, {"status", oid}, {"write", oid, "x"}, {"kill", oid},
		{"wait", oid}, {"rm", oid}, {"clear", oid}, {"poll", oid, "--new"},
	} {
		r := e.run2(args...)
		checkError(t, r, ExitError, "not found")
	}
	if list := e.ok("list"); strings.Contains(list, oid) {
		t.Errorf("list shows another scope's job:\n%s", list)
	}
	if list := e.ok("list", "--all-scopes"); !strings.Contains(list, oid) {
		t.Errorf("list --all-scopes misses the other scope's job:\n%s", list)
	}
	other.ok("kill", oid, "--grace", "100ms")
}

func TestKillTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A job whose grandchildren leave the group and ignore SIGTERM.
	id := e.start(`trap '' TERM; (setsid sh -c 'trap "" TERM; echo gc $$; exec sleep 300' &) ; (sleep 300 & echo c $!); echo ready; sleep 300`)
	e.ok("wait", id, "--until", "^ready", "--timeout", "20s")
	var pids []int
	eventually(t, 10*time.Second, "grandchild pids in the log", func() bool {
		out := e.ok("log", id, "--offset", "0")
		pids = nil
		for _, m := range regexp.MustCompile(`(?m)^(?:gc|c) (\d+)$`).FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[1])
			pids = append(pids, n)
		}
		return len(pids) == 2
	})
	var kr struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		Signalled []int  `json:"signalled"`
		Survivors []int  `json:"survivors"`
		Escalated bool   `json:"escalated"`
	}
	e.jsonOf(&kr, "kill", id, "--grace", "300ms")
	if kr.Status != "killed" || len(kr.Survivors) != 0 || !kr.Escalated {
		t.Errorf("kill: %+v", kr)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d survived the kill", pid)
		}
	}
	var j jobJSON
	e.jsonOf(&j, "status", id)
	_ = j
	// Killing again is not an error.
	if out := e.ok("kill", id); !strings.Contains(out, "already ended") {
		t.Errorf("second kill said %q", out)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start(`trap 'echo got INT; exit 7' INT; echo armed; while :; do sleep 0.05; done`)
	e.ok("wait", id, "--until", "armed", "--timeout", "20s")
	if out := e.ok("kill", id, "--signal", "int"); !strings.Contains(out, "sent INT") {
		t.Errorf("kill --signal said %q", out)
	}
	r := e.run2("wait", id, "--timeout", "20s")
	if r.code != 7 {
		t.Errorf("after INT: %v", r)
	}
}

func TestStartWaitAndYield(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run2("start", "--wait", "echo out; echo err >&2; exit 5")
	if r.code != 5 || r.stdout != "out\n" || !strings.HasPrefix(r.stderr, "err\n") {
		t.Errorf("start --wait: %v", r)
	}
	r = e.run2("start", "--wait", "--", "sh", "-c", "printf 'a b'")
	if r.code != 0 || r.stdout != "a b" || r.stderr != "" {
		t.Errorf("start --wait argv: %v", r)
	}

	// Fast: finished inside the window, shown as --wait shows it.
	r = e.run2("start", "--yield", "10s", "echo quick; exit 2")
	if r.code != 2 || r.stdout != "quick\n" {
		t.Errorf("yield fast: %v", r)
	}
	// Slow: the id and "running". The job waits for a file the test makes
	// only once start has answered, so it is still running at the end of
	// the window however slowly anything is scheduled.
	gate := filepath.Join(t.TempDir(), "go")
	r = e.run2("start", "--yield", "200ms", "while [ ! -e '"+gate+"' ]; do sleep 0.05; done; echo late")
	fields := strings.Fields(r.stdout)
	if r.code != 0 || len(fields) != 2 || fields[1] != "running" {
		t.Fatalf("yield slow: %v", r)
	}
	id := fields[0]
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.run2("wait", id, "--timeout", "20s")
	if r.code != 0 {
		t.Errorf("wait after yield: %v", r)
	}
	if out := e.ok("log", id); out != "late\n" {
		t.Errorf("output after yield hand-over %q", out)
	}

	// PI_BASH_YIELD_MS is the default window.
	e.extra = []string{"PI_BASH_YIELD_MS=10000"}
	r = e.run2("start", "echo from-env")
	if r.code != 0 || r.stdout != "from-env\n" {
		t.Errorf("PI_BASH_YIELD_MS: %v", r)
	}
	e.extra = nil

	// --json: the poll shape, with the status.
	var p pollJSON
	r = e.run2("--json", "start", "--yield", "10s", "echo j; exit 1")
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 1 || p.Job.Status != "failed" || !strings.Contains(p.Output.Output, "j") {
		t.Errorf("start --yield --json: %v %+v", err, p)
	}
}

func TestWaitTimeoutAndIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("echo one; sleep 300")
	r := e.run2("wait", id, "--timeout", "300ms")
	if r.code != ExitTimedOut || !strings.Contains(r.stdout, "timed out") {
		t.Errorf("wait --timeout: %v", r)
	}
	r = e.run2("wait", id, "--idle", "300ms", "--timeout", "20s")
	if r.code != 0 || !strings.Contains(r.stdout, "quiet") {
		t.Errorf("wait --idle: %v", r)
	}
	var w struct {
		Reason string    `json:"reason"`
		Jobs   []jobJSON `json:"jobs"`
		Match  string    `json:"match"`
	}
	e.jsonOf(&w, "wait", id, "--until", "on.", "--timeout", "20s")
	if w.Reason != "matched" || w.Match != "one" {
		t.Errorf("wait --until --json: %+v", w)
	}
	e.ok("kill", id, "--grace", "100ms")
}

func TestPollNewAndClean(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start(`printf '\033[31mred\033[0m\n'; printf '10%%\r20%%\r30%%\n'; read x; echo "$x"`)
	e.ok("wait", id, "--until", "30%", "--timeout", "20s")
	var p pollJSON
	e.jsonOf(&p, "poll", id, "--new")
	if p.Output.Output != "red\n30%\n" {
		t.Errorf("poll --new cleaned = %q", p.Output.Output)
	}
	e.jsonOf(&p, "poll", id, "--new")
	if p.Output.Output != "" {
		t.Errorf("second poll --new repeated %q", p.Output.Output)
	}
	e.ok("write", id, "again", "-n")
	e.ok("wait", id, "--timeout", "20s")
	e.jsonOf(&p, "poll", id, "--new")
	if p.Output.Output != "again\n" {
		t.Errorf("poll --new after write = %q", p.Output.Output)
	}
	raw := e.ok("log", id, "--offset", "0")
	if !strings.Contains(raw, "\x1b[31m") || !strings.Contains(raw, "10%\r20%") {
		t.Errorf("log is not raw: %q", raw)
	}
	e.extra = []string{"PI_BASH_MAX_OUTPUT_CHARS=4"}
	e.jsonOf(&p, "poll", id)
	if len([]rune(p.Output.Output)) > 4 {
		t.Errorf("PI_BASH_MAX_OUTPUT_CHARS=4 gave %q", p.Output.Output)
	}
}

func TestLogFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("for i in 1 2 3; do echo line $i; sleep 0.1; done")
	r := e.run2("log", id, "-f", "--offset", "0")
	if r.code != 0 || r.stdout != "line 1\nline 2\nline 3\n" {
		t.Errorf("log -f: %v", r)
	}
}

func TestWriteStdinAndEOF(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("wc -c")
	if r := e.runIn([]byte("12345"), "write", id, "-", "--eof"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	e.ok("wait", id, "--timeout", "20s")
	if out := strings.TrimSpace(e.ok("log", id)); out != "5" {
		t.Errorf("wc -c saw %q", out)
	}
	id = e.start("--no-stdin", "cat")
	e.ok("wait", id, "--timeout", "20s")
}

func TestJSONShapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var j jobJSON
	e.jsonOf(&j, "start", "--label", "shape", "--env", "A=1", "--", "sh", "-c", "echo x")
	if j.ID == "" || j.Scope != "default" {
		t.Fatalf("start --json: %+v", j)
	}
	e.ok("wait", j.ID, "--timeout", "20s")
	var page struct {
		Jobs []map[string]any `json:"jobs"`
		More *int             `json:"more"`
	}
	e.jsonOf(&page, "list", "--tail", "1")
	if list := page.Jobs; len(list) != 1 || list[0]["id"] != j.ID || list[0]["tail"] != "x\n" || page.More == nil || *page.More != 0 {
		t.Errorf("list --json --tail: %v", page)
	}
	for _, args := range [][]string{
		{"poll", j.ID}, {"log", j.ID}, {"status", j.ID}, {"wait", j.ID}, {"gc"}, {"clear", j.ID}, {"kill", j.ID},
	} {
		var v map[string]any
		e.jsonOf(&v, args...)
	}
	var rm map[string]any
	e.jsonOf(&rm, "rm", j.ID)
	if rm["removed"] != true {
		t.Errorf("rm --json: %v", rm)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run2("start", "--wait", "--", "/no/such/program")
	if r.code == 0 {
		t.Errorf("missing program: %v", r)
	}
	r = e.run2("start", "--cwd", "/no/such/dir", "true")
	if r.code != ExitError {
		t.Errorf("missing cwd: %v", r)
	}
	id := e.start("--name", "solo", "sleep 300")
	e.fails(ExitError, "solo", "start", "--name", "solo", "sleep 300")
	id2 := e.start("--name", "solo", "--replace", "sleep 300")
	if id2 == id {
		t.Errorf("--replace reused the id")
	}
	var j jobJSON
	e.jsonOf(&j, "status", id)
	if j.Status == "running" {
		t.Errorf("--replace left the old job running")
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run2("start", "--wait", "--timeout", "300ms", "echo started; sleep 300")
	if r.code != 128+15 && r.code != 128+9 {
		t.Errorf("timed out job exit %d, want 143 or 137\n%v", r.code, r)
	}
	if r.stdout != "started\n" || !strings.Contains(r.stderr, "timed_out") {
		t.Errorf("%v", r)
	}
}

func TestEventsFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.start("true")
	e.ok("wait", first, "--timeout", "20s")
	var last struct {
		ID int64 `json:"id"`
	}
	lines := strings.Split(strings.TrimSpace(e.ok("events")), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.ID == 0 {
		t.Fatalf("events: %v %q", err, lines)
	}

	cmd := exec.Command(jobsBin, "events", "-f", "--since", strconv.FormatInt(last.ID, 10))
	cmd.Env = e.environ()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer cmd.Process.Kill()

	id := e.start("echo x")
	got := make(chan string, 1)
	go func() {
		// Read until the second job's terminal transition.
		var seen []string
		dec := json.NewDecoder(pr)
		for {
			var ev struct {
				ID    int64  `json:"id"`
				JobID string `json:"job_id"`
				To    string `json:"to"`
			}
			if err := dec.Decode(&ev); err != nil {
				got <- strings.Join(seen, ",") + " " + err.Error()
				return
			}
			if ev.ID <= last.ID {
				got <- fmt.Sprintf("event %d is not after --since %d", ev.ID, last.ID)
				return
			}
			seen = append(seen, ev.To)
			if ev.JobID == id && ev.To == "done" {
				got <- strings.Join(seen, ",")
				return
			}
		}
	}()
	select {
	case s := <-got:
		if s != "starting,running,done" {
			t.Errorf("events -f gave %s", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("events -f did not report the job's end")
	}
	// Interrupting -f is a normal end.
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() != 0 && ee.ExitCode() != ExitInterrupted {
		t.Errorf("events -f after SIGINT: %v %s", err, errb.String())
	}
	pr.Close()
}

func TestTmux(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	e := newEnv(t)
	id := e.start("--tmux", "echo ready; read line; echo \"got $line\"; sleep 300")
	e.ok("wait", id, "--until", "ready", "--timeout", "20s")
	e.ok("send-keys", id, "--literal", "hello")
	e.ok("send-keys", id, "Enter")
	eventually(t, 10*time.Second, "the tmux screen shows the answer", func() bool {
		return strings.Contains(e.ok("capture", id), "got hello")
	})
	var c struct {
		Screen string `json:"screen"`
	}
	e.jsonOf(&c, "capture", id, "--lines", "10")
	if !strings.Contains(c.Screen, "ready") {
		t.Errorf("capture --json: %q", c.Screen)
	}
	var a struct {
		Argv []string `json:"argv"`
	}
	e.jsonOf(&a, "attach", id)
	if len(a.Argv) == 0 || a.Argv[0] != "tmux" {
		t.Errorf("attach --json: %v", a.Argv)
	}
	// Text that is no key name is typed, as tmux types it.
	e.ok("send-keys", id, "echo typed-text", "Enter")
	eventually(t, 10*time.Second, "the typed text to run", func() bool {
		return strings.Contains(e.ok("capture", id), "typed-text")
	})
	e.fails(ExitUsage, "empty key", "send-keys", id, "")
	// tmux output ends its lines with \r\n: "$" still anchors, and an
	// until that does not happen before the timeout is a timeout (124).
	e.ok("wait", id, "--until", "^got hello$", "--timeout", "20s")
	if r := e.run2("wait", id, "--until", "never-printed", "--timeout", "500ms"); r.code != ExitTimedOut || r.stderr != "" {
		t.Errorf("until with a timeout on a tmux job: %v, want exit %d", r, ExitTimedOut)
	}
	plain := e.start("sleep 300")
	e.fails(ExitError, "tmux", "capture", plain)
	e.ok("kill", id, "--grace", "100ms")
	e.ok("kill", plain, "--grace", "100ms")
}
