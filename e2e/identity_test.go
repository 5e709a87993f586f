package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/testlong"
	"github.com/agentjobs/jobs/internal/vocab"
)

func init() {
	// trap-signals FILE: says ready, then appends the name of every
	// catchable signal it gets to FILE and carries on; a stranger that
	// tells whether anyone signalled it.
	helperModes["trap-signals"] = func(args []string) error {
		sigs := make(chan os.Signal, 16)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCONT,
			syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT)
		fmt.Println("ready")
		for s := range sigs {
			f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			fmt.Fprintln(f, s)
			f.Close()
		}
		return nil
	}
	// fork-grandchild: starts a grandchild in our process group that
	// keeps our stdout and sleeps, prints its pid, exits 0.
	helperModes["fork-grandchild"] = func([]string) error {
		c := exec.Command(os.Args[0], "e2e-helper", "ready-idle")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			return err
		}
		fmt.Printf("grandchild %d\n", c.Process.Pid)
		return nil
	}
}

// stranger is a process the test starts outside any job, in its own
// process group, that records every signal it is sent.
type stranger struct {
	pid   int
	start int64
	file  string
	cmd   *exec.Cmd
}

func startStranger(t *testing.T, dir string) *stranger {
	t.Helper()
	s := &stranger{file: filepath.Join(dir, fmt.Sprintf("signals-%d", time.Now().UnixNano()))}
	s.cmd = exec.Command(helperBin, "e2e-helper", "trap-signals", s.file)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = s.cmd.Process.Pid
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("stranger said %q", line)
	}
	_, s.start, _ = procState(s.pid)
	return s
}

// untouched fails the test unless the stranger is alive, not stopped, and
// was sent no catchable signal.
func (s *stranger) untouched(t *testing.T, what string) {
	t.Helper()
	st, start, ok := procState(s.pid)
	switch {
	case !ok || st == 'Z' || start != s.start:
		t.Errorf("%s: the stranger %d is dead", what, s.pid)
	case st == 'T':
		t.Errorf("%s: the stranger %d is stopped", what, s.pid)
	}
	if got := s.signals(); got != "" {
		t.Errorf("%s: the stranger %d was signalled: %q", what, s.pid, got)
	}
}

func (s *stranger) signals() string {
	b, _ := os.ReadFile(s.file)
	return strings.TrimSpace(string(b))
}

// forgeRunning records, as a dead supervisor would have left it, a running
// job whose main process and group are pid with the given start time, and
// returns its id. The supervisor's lock is free: it died.
func forgeRunning(t *testing.T, w *world, pid, pgid int, start int64) string {
	t.Helper()
	w.ok("list") // creates the database
	ctx := context.Background()
	d, err := db.Open(ctx, w.dbPath())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sup := db.Supervisor{ID: db.NewID(), PID: 1 << 22, Kind: "detached",
		LockPath: filepath.Join(w.base, "dead.lock"), SocketPath: filepath.Join(w.base, "dead.sock")}
	// Its lock is held until the row says running: a sweep meanwhile
	// (any jobs command of the world) would find a dead supervisor's job
	// starting, and call it lost before it ran.
	lock, err := os.OpenFile(sup.LockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Released by name, not by the close alone: a process another test
	// forks meanwhile holds a copy of every descriptor until its exec
	// closes it, and a flock lasts while any copy is open. Beside
	// stress-ng, the copy outlived the close, and the kill that followed
	// took the dead supervisor for a live one that does not answer.
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err := d.CreateSupervisor(ctx, sup); err != nil {
		t.Fatal(err)
	}
	j, err := d.CreateJob(ctx, db.NewJob{Scope: "default", Command: "sleep 1000", Cwd: w.base, SupervisorID: sup.ID}, db.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Transition(ctx, j.ID, db.Transition{To: vocab.StatusRunning, PID: pid, PGID: pgid, PIDStart: start}); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// lostSurvivors returns the pids the job's lost event lists as survivors;
// ok is false when there is no lost event or it lists none at all.
func (w *world) lostSurvivors(id string) (pids []int, ok bool) {
	w.t.Helper()
	_, events := w.status(id)
	for _, e := range events {
		if e.To != "lost" {
			continue
		}
		var d struct {
			Survivors *[]int `json:"survivors"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil || d.Survivors == nil {
			return nil, false
		}
		return *d.Survivors, true
	}
	return nil, false
}

// Row B14 guards: a job's pid and group id are never taken for its
// processes once reused: only the recorded start time on the recorded boot
// proves the main process, and a group whose leader is another process is
// not the job's.
func TestB14PIDReuseNeverSignalled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		offset int64  // added to the stranger's real start time
		boot   string // forged boot id; "" keeps the current one
		theJob bool   // the row does name the stranger
	}{
		{name: "earlier start", offset: -1},
		{name: "later start", offset: 1},
		{name: "other boot", boot: "00000000-0000-0000-0000-000000000000"},
		{name: "same start and boot", theJob: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			s := startStranger(t, w.base)
			id := forgeRunning(t, w, s.pid, s.pid, s.start+c.offset)
			if c.boot != "" {
				if _, err := w.sqlDB().Exec(`UPDATE jobs SET boot_id = ? WHERE id = ?`, c.boot, id); err != nil {
					t.Fatal(err)
				}
			}
			gc := w.ok("gc")
			if !strings.Contains(gc, "marked 1 job lost") {
				t.Errorf("gc: %q, want the job marked lost", gc)
			}
			j := w.poll(id)
			survivors, ok := w.lostSurvivors(id)
			if j.Status != "lost" || !ok {
				t.Fatalf("after gc: status %s, lost event survivors %v (listed %t)", j.Status, survivors, ok)
			}
			if c.theJob {
				if j.Descendants != 1 || !slices.Equal(survivors, []int{s.pid}) {
					t.Errorf("the job's own process: poll counts %d, lost event lists %v; want 1 and [%d]", j.Descendants, survivors, s.pid)
				}
				k := w.kill(id, "--grace", "200ms")
				if !slices.Contains(k.Signalled, s.pid) {
					t.Errorf("kill signalled %v, want the job's process %d", k.Signalled, s.pid)
				}
				waitFor(t, 10*time.Second, "the job's process to end", func() bool { return !sameProcAlive(s.pid, s.start) })
				t.Logf("MATRIX-FIGURE %s", "row naming the process (start time and boot match): lost with it listed, then killed")
				return
			}
			if j.Descendants != 0 || len(survivors) != 0 {
				t.Errorf("a stranger counted as the job's: poll counts %d, lost event lists %v", j.Descendants, survivors)
			}
			k := w.kill(id, "--grace", "200ms")
			if len(k.Signalled) != 0 || len(k.Survivors) != 0 {
				t.Errorf("kill of the lost job = %+v, want nothing signalled", k)
			}
			s.untouched(t, "after gc, poll and kill")
			t.Logf("MATRIX-FIGURE %s", "stranger sleep alive and unsignalled after gc, poll and kill ("+c.name+"); 0 signals sent")
		})
	}
}

// Row D7 guards: kill never signals a process group or pid that is
// protected (0, 1, the caller's own group, a supervisor's), whatever the
// job's row says, even when the row's start times match.
func TestD7KillNeverHitsProtectedGroup(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	live := w.start(helper("ready-idle")...)
	w.waitOutput(live, "ready")
	sup := w.supervisorPID()
	supInfo, err := proc.Inspect(sup)
	if err != nil {
		t.Fatal(err)
	}
	// The CLI runs in the group of a stranger, so a signal to the CLI's
	// own group (or to group 0, which means it) reaches the stranger.
	group := startStranger(t, w.base)
	init1, _ := proc.Inspect(1)

	for _, c := range []struct {
		name      string
		pid, pgid int
		start     int64
	}{
		{name: "pgid 0", pid: 0, pgid: 0, start: group.start},
		{name: "pgid 1", pid: 1, pgid: 1, start: init1.StartTime},
		{name: "the CLI's own group", pid: group.pid, pgid: group.pid, start: group.start},
		{name: "the supervisor's group", pid: sup, pgid: supInfo.PGID, start: supInfo.StartTime},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := w.start("--", "true")
			w.waitTerminal(id, 30*time.Second)
			// A finished row whose main process and group are the
			// protected ones, with matching start times: only the
			// protection stands between the kill and them.
			if _, err := w.sqlDB().Exec(`UPDATE jobs SET pid = nullif(?, 0), pgid = nullif(?, 0), pid_start = nullif(?, 0), end_ticks = ? WHERE id = ?`,
				c.pid, c.pgid, c.start, proc.Now(), id); err != nil {
				t.Fatal(err)
			}
			cmd := w.cmd("--json", "kill", id, "--grace", "200ms")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: group.pid}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kill: %v\n%s", err, out)
			}
			var k killResult
			if err := json.Unmarshal(out, &k); err != nil {
				t.Fatalf("kill: %v\n%s", err, out)
			}
			if len(k.Signalled) != 0 {
				t.Errorf("kill signalled %v, want nothing", k.Signalled)
			}
			group.untouched(t, "the CLI's group")
			if !sameProcAlive(sup, supInfo.StartTime) {
				t.Fatalf("the supervisor %d died", sup)
			}
			if j := w.poll(live); j.Status != "running" {
				t.Errorf("the supervisor's running job is %s", j.Status)
			}
		})
	}
	w.kill(live, "--grace", "100ms")
	t.Logf("MATRIX-FIGURE %s", "rows naming pgid 0, 1, the CLI's group and the supervisor's: 0 signals sent, supervisor and its job alive")
}

// Row B1 guards: a supervisor killed mid-write leaves a database that is
// intact, output with the prefix property, and a job marked lost by the
// next reader with a lost event that lists its survivors (chunks are
// appended in WAL transactions; whoever takes the dead supervisor's lock
// marks its jobs). JOBS_E2E_B1_ROUNDS (default 3) kills that many
// supervisors, each at a random point of its flood.
func TestB1SupervisorKilledDuringFlood(t *testing.T) {
	t.Parallel()
	n := envInt64("JOBS_E2E_FLOOD_BYTES", 64<<20)
	rounds := envInt64("JOBS_E2E_B1_ROUNDS", testlong.Pick[int64](1, 3))
	seed := uint64(envInt64("JOBS_E2E_SEED", time.Now().UnixNano()))
	t.Logf("kill points from seed %d (JOBS_E2E_SEED=%d repeats them)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 14))
	var stored, chunks int64
	for r := int64(0); r < rounds; r++ {
		// Somewhere between an eighth and a half of the flood. A flood
		// that ends before the kill lands (a fast machine) is tried again
		// four times larger, up to 1 GiB, rather than skipped.
		size := n
		for {
			at := size/8 + rng.Int64N(size/2-size/8)
			s, c, ok := killSupervisorMidFlood(t, "flood", pattern, size, at)
			if ok {
				stored, chunks = stored+s, chunks+c
				break
			}
			if size >= 1<<30 {
				t.Fatalf("a flood of %d bytes ended before the supervisor could be killed", size)
			}
			t.Logf("a flood of %d bytes ended before the kill; again with %d", size, 4*size)
			size *= 4
		}
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d kills at random points: integrity ok, lost on first poll, lost event lists survivors, %d bytes in %d chunks a gapless byte-exact prefix", rounds, stored, chunks))
}

// Row B1 with compressed chunks: a supervisor killed during a flood of
// text, whose chunks are stored zstd-compressed, leaves a gapless
// byte-exact prefix of the output too (a compressed chunk is committed
// whole or not at all), readable by the next reader.
func TestB1SupervisorKilledDuringTextFlood(t *testing.T) {
	t.Parallel()
	// Four times the random flood: text is stored eight times smaller,
	// and a smaller flood often ended before the kill landed.
	n := 4 * envInt64("JOBS_E2E_FLOOD_BYTES", 64<<20)
	seed := uint64(envInt64("JOBS_E2E_SEED", time.Now().UnixNano()))
	t.Logf("kill points from seed %d (JOBS_E2E_SEED=%d repeats them)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 15))
	for size := n; ; size *= 4 {
		at := size/16 + rng.Int64N(size/4-size/16)
		if _, _, ok := killSupervisorMidFlood(t, "flood-text", textPattern, size, at); ok {
			return
		}
		if size >= 1<<30 {
			t.Fatalf("a flood of %d bytes ended before the supervisor could be killed", size)
		}
		t.Logf("a flood of %d bytes ended before the kill; again with %d", size, 4*size)
	}
}

// killSupervisorMidFlood SIGKILLs the supervisor of a job flooding n bytes
// of the helper's output (flood or flood-text, whose bytes src gives) once
// at least at bytes are captured and checks what is left; it returns the
// bytes and chunks stored, or false when the flood ended before the kill.
func killSupervisorMidFlood(t *testing.T, flood string, src func() io.Reader, n, at int64) (int64, int64, bool) {
	t.Helper()
	w := newWorld(t)
	id := w.start(append([]string{"--max-output", "0", "--no-stdin", "--ttl", "0"}, helper(flood, strconv.FormatInt(n, 10))...)...)
	sup := w.supervisorPID()
	var before job
	waitFor(t, 2*time.Minute, "part of the flood captured", func() bool {
		before, _ = w.status(id)
		return before.OutputBytes >= at || before.Status != "running"
	})
	if before.Status != "running" {
		t.Logf("the look before the kill found the job %s with %d of %d bytes", before.Status, before.OutputBytes, n)
		return 0, 0, false
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The thread group leader turns zombie before the other threads have
	// exited and the files (the supervisor's lock) are released: wait for
	// the lock, the mark of a dead supervisor.
	lock := w.supervisorLock(sup)
	waitFor(t, 10*time.Second, "the supervisor's lock to be free", func() bool { return lockFree(lock) })

	j := w.poll(id)
	if j.Status == "done" && j.OutputBytes == n {
		// The flood ended, and its end was stored, between the look
		// above and the kill landing: no kill in the middle of a flood
		// to judge, so the caller tries a larger one.
		t.Logf("the look before the kill found %d of %d bytes; the job was done when the kill landed", before.OutputBytes, n)
		return 0, 0, false
	}
	if j.Status != "lost" {
		t.Errorf("status on the next poll = %q, want lost", j.Status)
	}
	survivors, ok := w.lostSurvivors(id)
	if !ok {
		t.Errorf("the lost event does not list survivors")
	}
	for _, p := range survivors {
		if p != before.PID {
			t.Errorf("lost event lists %d, not a process of the job (main %d)", p, before.PID)
		}
	}
	w.integrity()
	got := w.readAll(id, j.OutputBytes)
	if int64(len(got)) != j.OutputBytes {
		t.Errorf("read %d bytes, job says %d", len(got), j.OutputBytes)
	}
	// On a loaded machine the rest of the flood can be stored between the
	// look above and the kill landing (seen under stress-ng: 57 of 64 MiB
	// before, all after): that round then proves the prefix of the whole
	// flood, which is still a prefix. Less than was seen before is a loss.
	if int64(len(got)) >= n {
		t.Logf("the whole flood (%d bytes) was stored before the kill landed", n)
	}
	if len(got) < int(before.OutputBytes) {
		t.Errorf("captured %d bytes of %d; %d were captured before the kill", len(got), n, before.OutputBytes)
	}
	want := make([]byte, len(got))
	if _, err := io.ReadFull(src(), want); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("captured output is not a prefix of what the child wrote: differs at byte %d of %d", i, len(got))
	}
	chunks := w.checkChunksContiguous(id)
	// The processes of a lost job are not killed behind the user's back;
	// jobs kill still ends them, and the next start gets a new supervisor.
	w.jobs("kill", id, "--grace", "100ms")
	next := w.start("--", "true")
	if j := w.waitTerminal(next, 30*time.Second); j.Status != "done" {
		t.Errorf("start after the crash: %s", j.Status)
	}
	return int64(len(got)), chunks, true
}

// checkChunksContiguous checks that the job's chunks, in seq order, number
// 0, 1, 2 … and cover the output without a hole or an overlap, and returns
// how many there are.
func (w *world) checkChunksContiguous(id string) int64 {
	w.t.Helper()
	rows, err := w.sqlDB().Query(`SELECT seq, byte_offset, coalesce(size, length(data)) FROM chunks WHERE job_id = ? ORDER BY seq`, id)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var i, next int64
	for ; rows.Next(); i++ {
		var seq, off, n int64
		if err := rows.Scan(&seq, &off, &n); err != nil {
			w.t.Fatal(err)
		}
		if seq != i || off != next {
			w.t.Fatalf("chunk %d: seq %d at offset %d, want seq %d at offset %d", i, seq, off, i, next)
		}
		next = off + n
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	return i
}

// Row B1 guards: the processes of a lost job are listed in its lost event,
// counted by poll, and ended by kill (Decision 1), not killed behind the
// user's back.
func TestB1LostJobSurvivorsListed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(helper("ready-idle")...)
	w.waitOutput(id, "ready")
	pid := w.poll(id).PID
	_, start, _ := procState(pid)
	defer killLeftover(pid, start)
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the supervisor's lock to be free", func() bool { return lockFree(lock) })
	j := w.poll(id)
	if j.Status != "lost" || j.Descendants != 1 {
		t.Errorf("after the supervisor died: %s with %d processes alive, want lost with 1", j.Status, j.Descendants)
	}
	if survivors, _ := w.lostSurvivors(id); !slices.Equal(survivors, []int{pid}) {
		t.Errorf("lost event lists survivors %v, want [%d]", survivors, pid)
	}
	if !sameProcAlive(pid, start) {
		t.Fatalf("the lost job's process %d was killed behind the user's back", pid)
	}
	k := w.kill(id, "--grace", "200ms")
	if !slices.Contains(k.Signalled, pid) || len(k.Survivors) != 0 {
		t.Errorf("kill = %+v, want %d signalled and no survivors", k, pid)
	}
	waitFor(t, 10*time.Second, "the survivor to end", func() bool { return !sameProcAlive(pid, start) })
	if j := w.poll(id); j.Descendants != 0 {
		t.Errorf("after kill poll counts %d processes", j.Descendants)
	}
	t.Logf("MATRIX-FIGURE %s", "lost event lists the 1 survivor; poll counts 1; kill ends it")
}

// pollText is the first line of `jobs poll`.
func (w *world) pollText(id string) string {
	w.t.Helper()
	line, _, _ := strings.Cut(w.ok("poll", id), "\n")
	return line
}

// pollStopped reports the stopped field of `jobs --json poll`.
func (w *world) pollStopped(id string) bool {
	w.t.Helper()
	var p struct {
		Job struct {
			Stopped bool `json:"stopped"`
		} `json:"job"`
	}
	out := w.ok("--json", "poll", id)
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		w.t.Fatalf("poll: %v\n%s", err, out)
	}
	return p.Job.Stopped
}

// Row B3 guards: a stopped job shows as stopped (text and JSON), and kill
// sends SIGCONT after SIGTERM so the stopped child acts on the TERM at once
// instead of sitting out the grace until SIGKILL.
func TestB3StoppedChildThenKill(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(helper("ready-idle")...)
	w.waitOutput(id, "ready")
	pid := w.poll(id).PID
	_, start, _ := procState(pid)
	defer killLeftover(pid, start)
	if w.pollStopped(id) {
		t.Errorf("a running job shows stopped")
	}
	w.ok("pause", id)
	waitFor(t, 10*time.Second, "the child to stop", func() bool {
		s, _, _ := procState(pid)
		return s == 'T'
	})
	if !w.pollStopped(id) {
		t.Errorf("poll --json does not say stopped for a job in state T")
	}
	if text := w.pollText(id); !strings.Contains(text, "running (stopped)") {
		t.Errorf("poll says %q, want running (stopped)", text)
	}
	began := time.Now()
	k := w.kill(id, "--grace", "1s")
	took := time.Since(began)
	if k.Status != "killed" || k.Escalated || len(k.Survivors) != 0 {
		t.Errorf("kill of a stopped child = %+v, want killed by SIGTERM without escalation", k)
	}
	if j, _ := w.status(id); strings.TrimPrefix(j.Signal, "SIG") != "TERM" {
		t.Errorf("ended by signal %q, want TERM", j.Signal)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("poll shows running (stopped); kill --grace 1s ended it by TERM in %d ms, no SIGKILL", took.Milliseconds()))
}

// Row B3 guards: pause and resume stop and continue the job's processes,
// and the job shows stopped only while it is.
func TestB3PauseResume(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(append([]string{"--"}, "sh", "-c", "sleep 1000 & echo started; wait")...)
	w.waitOutput(id, "started")
	pid := w.poll(id).PID
	_, start, _ := procState(pid)
	defer func() { w.jobs("kill", id, "--grace", "100ms"); killLeftover(pid, start) }()
	out := w.ok("--json", "pause", id)
	var r struct {
		Signalled []int `json:"signalled"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Signalled) != 2 {
		t.Fatalf("pause = %s (%v), want the shell and its sleep", out, err)
	}
	for _, p := range r.Signalled {
		waitFor(t, 10*time.Second, fmt.Sprintf("process %d to stop", p), func() bool { s, _, _ := procState(p); return s == 'T' })
	}
	if !w.pollStopped(id) {
		t.Errorf("paused job does not show stopped")
	}
	w.ok("resume", id)
	for _, p := range r.Signalled {
		waitFor(t, 10*time.Second, fmt.Sprintf("process %d to continue", p), func() bool { s, _, _ := procState(p); return s != 'T' })
	}
	if w.pollStopped(id) {
		t.Errorf("resumed job still shows stopped")
	}
	t.Logf("MATRIX-FIGURE %s", "pause stopped 2 of 2 processes (state T, shown stopped); resume continued both")
}

// Row B3 guards: a job's timeout ends it even while it is stopped.
func TestB3StoppedJobTimesOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// The timeout leaves room to pause the job first on a loaded
	// machine; the outcome is the order (paused, then timed out by TERM),
	// not how fast.
	id := w.start(append([]string{"--timeout", "10s"}, helper("ready-idle")...)...)
	w.waitOutput(id, "ready")
	pid := w.poll(id).PID
	_, start, _ := procState(pid)
	defer killLeftover(pid, start)
	w.ok("pause", id)
	j := w.waitTerminal(id, 90*time.Second)
	if j.Status != "timed_out" {
		t.Errorf("stopped job with --timeout 10s ended %s", j.Status)
	}
	// The child handles the TERM as soon as SIGCONT wakes it, before the
	// grace (2 s) runs out: the signal says so, not the clock.
	if j.RuntimeMS < 10000 {
		t.Errorf("runtime %d ms, before the 10 s timeout", j.RuntimeMS)
	}
	if k, _ := w.status(id); k.Signal != "TERM" {
		t.Errorf("ended by signal %q, want TERM (acted on after SIGCONT, before the grace ran out)", k.Signal)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("stopped job timed_out by TERM after %d ms (timeout 10 s, grace 2 s)", j.RuntimeMS))
}

// Row B4 guards: kill escalates to SIGKILL after the grace period when the
// child ignores SIGTERM, records KILL as the signal, and reports no
// survivor.
func TestB4ChildIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"helper", helper("ignore-term")},
		{"sh trap", []string{"--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			id := w.start(c.argv...)
			w.waitOutput(id, "ready")
			pid := w.poll(id).PID
			_, start, _ := procState(pid)
			defer killLeftover(pid, start)
			const grace = time.Second
			began := time.Now()
			k := w.kill(id, "--grace", grace.String())
			took := time.Since(began)
			if k.Status != "killed" || !k.Escalated || len(k.Survivors) != 0 || !slices.Contains(k.Signalled, pid) {
				t.Errorf("kill = %+v, want killed, escalated, %d signalled, no survivors", k, pid)
			}
			if took < grace {
				t.Errorf("kill returned after %v: SIGKILL came before the %v grace", took, grace)
			}
			if sameProcAlive(pid, start) {
				t.Errorf("pid %d survived the kill", pid)
			}
			j, _ := w.status(id)
			if j.Status != "killed" || j.Signal != "KILL" || j.ExitCode == nil || *j.ExitCode != 128+9 {
				t.Errorf("stored: %s, signal %q, exit %v; want killed by KILL, exit 137", j.Status, j.Signal, j.ExitCode)
			}
			t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%s: killed by KILL after the 1 s grace (%d ms), %d signalled, 0 survivors", c.name, took.Milliseconds(), len(k.Signalled)))
		})
	}
}

// Row B5 guards: a grandchild left in the job's group keeps being the
// job's: poll counts it after the job is done, and kill ends that very
// process, not only the leader.
func TestB5GrandchildInGroup(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(helper("fork-grandchild")...)
	out := w.waitOutput(id, "ready")
	var gc int
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "grandchild "); ok {
			gc, _ = strconv.Atoi(rest)
		}
	}
	if gc == 0 {
		t.Fatalf("no grandchild pid in %q", out)
	}
	_, start, _ := procState(gc)
	defer killLeftover(gc, start)
	j := w.waitTerminal(id, 30*time.Second)
	if j.Status != "done" {
		t.Errorf("job ended %s, want done", j.Status)
	}
	if info, err := proc.Inspect(gc); err != nil || info.PGID != j.PID {
		t.Fatalf("grandchild %d is not in the job's group %d: %+v %v", gc, j.PID, info, err)
	}
	if j.Descendants != 1 {
		t.Errorf("poll counts %d processes, want the 1 grandchild", j.Descendants)
	}
	k := w.kill(id, "--grace", "200ms")
	if !slices.Equal(k.Signalled, []int{gc}) {
		t.Errorf("kill signalled %v, want [%d]", k.Signalled, gc)
	}
	waitFor(t, 10*time.Second, "the grandchild to end", func() bool { return !sameProcAlive(gc, start) })
	t.Logf("MATRIX-FIGURE %s", "done with 1 grandchild alive, counted by poll; kill signalled exactly that pid and it ended")
}

// taggedPIDs lists the live processes carrying JOBS_ID=id, as the test
// sees them in /proc.
func taggedPIDs(id string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !procAlive(pid) {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == "JOBS_ID="+id {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Row B6 guards: a process that left the job's group (setsid, a daemon's
// double fork) is still found through the job's JOBS_ID: counted by poll
// and killed, never a clean kill while it survives.
func TestB6EscapedGrandchild(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		argv []string
		say  string
	}{
		{"setsid daemon", helper("daemon"), "ready"},
		{"sh setsid sleep", []string{"--", "sh", "-c", "setsid sleep 1007 >/dev/null 2>&1 & echo started"}, "started"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			id := w.start(c.argv...)
			w.waitOutput(id, c.say)
			j := w.waitTerminal(id, 60*time.Second)
			if j.Status != "done" || j.ExitCode == nil || *j.ExitCode != 0 {
				t.Errorf("job ended %s (exit %v), want done with 0", j.Status, j.ExitCode)
			}
			var escaped []int
			waitFor(t, 10*time.Second, "the escaped process", func() bool {
				escaped = taggedPIDs(id)
				return len(escaped) > 0
			})
			starts := map[int]int64{}
			for _, p := range escaped {
				info, err := proc.Inspect(p)
				if err != nil || info.PGID == j.PID {
					t.Fatalf("process %d did not leave the job's group: %+v %v", p, info, err)
				}
				starts[p] = info.StartTime
				defer killLeftover(p, info.StartTime)
			}
			if j := w.poll(id); j.Descendants != len(escaped) {
				t.Errorf("poll counts %d processes, %d escaped ones run", j.Descendants, len(escaped))
			}
			k := w.kill(id, "--grace", "200ms")
			for _, p := range escaped {
				if !slices.Contains(k.Signalled, p) {
					t.Errorf("kill signalled %v, not the escaped %d", k.Signalled, p)
				}
			}
			for p, st := range starts {
				// A process that got SIGKILL may take a moment to be
				// gone from /proc; one that is still there after that
				// survived, and the kill must have said so.
				deadline := time.Now().Add(patience)
				for sameProcAlive(p, st) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if sameProcAlive(p, st) && !slices.Contains(k.Survivors, p) {
					t.Errorf("escaped %d outlived a kill that reported it clean: %+v", p, k)
				}
			}
			t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%s: done in %d ms; %d escaped process counted by poll and killed via JOBS_ID", c.name, j.RuntimeMS, len(escaped)))
		})
	}
}

// Row B19 guards: --timeout ends the job as timed_out within its bound,
// escalating to SIGKILL for a child that ignores SIGTERM, and leaves
// nothing of its group.
func TestB19Timeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"sleeping", helper("ready-idle")},
		{"ignores SIGTERM", helper("ignore-term")},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			id := w.start(append([]string{"--timeout", "2s"}, c.argv...)...)
			w.waitOutput(id, "ready")
			pid := w.poll(id).PID
			_, start, _ := procState(pid)
			defer killLeftover(pid, start)
			j := w.waitTerminal(id, 30*time.Second)
			if j.Status != "timed_out" {
				t.Errorf("ended %s, want timed_out", j.Status)
			}
			// The supervisor's default grace is 2 s; past it, SIGKILL.
			// The upper bound is a deadline for a loaded machine: a
			// timeout that never fired would run for the job's 1000 s.
			if j.RuntimeMS < 2000 || j.RuntimeMS > 2000+2000+30000 {
				t.Errorf("runtime %d ms, want within [2 s, 2 s + grace + 30 s]", j.RuntimeMS)
			}
			if left := groupMembers(pid); len(left) != 0 {
				t.Errorf("processes of group %d left: %v", pid, left)
			}
			t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%s: timed_out after %d ms (timeout 2 s, grace 2 s), group gone", c.name, j.RuntimeMS))
		})
	}
}

// groupMembers lists the live processes of group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if info, err := proc.Inspect(pid); err == nil && info.PGID == pgid && !info.Dead() {
			out = append(out, pid)
		}
	}
	return out
}
