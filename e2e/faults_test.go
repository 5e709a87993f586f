package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/supervisor"
	"github.com/agentjobs/jobs/internal/testwait"
)

// readAll reads a job's whole stored output through paged `jobs log
// --offset --limit` calls.
func (w *world) readAll(id string, total int64) []byte {
	w.t.Helper()
	const page = 16 << 20
	var out []byte
	for off := int64(0); off < total; off += page {
		r := w.jobs("log", id, "--offset", strconv.FormatInt(off, 10), "--limit", strconv.Itoa(page))
		if r.code != 0 {
			w.t.Fatalf("%v", r)
		}
		out = append(out, r.stdout...)
	}
	return out
}

// waitTerminal waits for the job to reach a terminal status and returns it.
func (w *world) waitTerminal(id string, d time.Duration) job {
	w.t.Helper()
	var j job
	waitFor(w.t, d, "job "+id+" to end", func() bool {
		j = w.poll(id)
		switch j.Status {
		case "queued", "starting", "running":
			return false
		}
		return true
	})
	return j
}

// waitOutput waits until the job's output contains s.
//
// It fails once the output has not grown for 30 s: a loaded machine may
// take minutes to print many lines (each a fork of sleep, say), and a
// stuck capture stops growing.
func (w *world) waitOutput(id, s string) string {
	w.t.Helper()
	var out string
	testwait.ForProgress(w.t, 30*time.Second, 5*time.Minute, "output "+strconv.Quote(s), func() (bool, int64, string) {
		out = w.ok("log", id, "--offset", "0", "--limit", "16777216")
		return strings.Contains(out, s), int64(len(out)), tailOf(out, 2000)
	})
	return out
}

func eventsText(events []event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s→%s %s", e.Kind, e.From, e.To, e.Detail)
	}
	return b.String()
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(b)
}

// Protection: the supervisor, not the CLI, creates the job and carries it
// to running or failed whatever happens to the caller (Start continues
// under context.WithoutCancel); a CLI killed while it spawns the
// supervisor leaves at most a supervisor, no job row.
func TestCLIKilledMidStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 16; i++ {
		if i%4 == 0 {
			w.stop() // also kill CLIs that are spawning the supervisor
		}
		c := w.cmd(append([]string{"start", "--ttl", "0"}, helper("ready-idle")...)...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// The fault: SIGKILL at a random point of the CLI's work.
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	d := w.sqlDB()
	waitFor(t, 30*time.Second, "no job left starting", func() bool {
		w.ok("list") // list notices dead supervisors, as poll does
		var n int
		if err := d.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'starting'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	w.ok("kill", "--all", "--grace", "100ms")
	w.integrity()
}

// Protection: a job left in starting by a supervisor that died between
// creating it and starting its process is marked lost by the next reader
// (sweep.Lost covers starting as well as running jobs).
func TestHalfMadeJobOfDeadSupervisor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.ok("list") // creates the database
	ctx := context.Background()
	d, err := db.Open(ctx, w.dbPath())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sup := db.Supervisor{ID: db.NewID(), PID: 1 << 22, Kind: "detached",
		LockPath: filepath.Join(w.base, "dead.lock"), SocketPath: filepath.Join(w.base, "dead.sock")}
	if err := os.WriteFile(sup.LockPath, nil, 0o600); err != nil { // a lock nobody holds
		t.Fatal(err)
	}
	if err := d.CreateSupervisor(ctx, sup); err != nil {
		t.Fatal(err)
	}
	j, err := d.CreateJob(ctx, db.NewJob{Scope: "default", Command: "true", Cwd: w.base, SupervisorID: sup.ID, Mode: "pipe", Stdin: "pipe"}, db.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.poll(j.ID); got.Status != "lost" {
		t.Errorf("half-made job of a dead supervisor: poll says %q, want lost", got.Status)
	}
}

// killResult is the JSON of `jobs kill`.
type killResult struct {
	Status    string `json:"status"`
	Signalled []int  `json:"signalled"`
	Survivors []int  `json:"survivors"`
	Escalated bool   `json:"escalated"`
}

func (w *world) kill(args ...string) killResult {
	w.t.Helper()
	var k killResult
	out := w.ok(append([]string{"--json", "kill"}, args...)...)
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		w.t.Fatalf("kill: %v\n%s", err, out)
	}
	return k
}

// Protection: timeouts run on the monotonic clock, and durations are
// measured with it, not by subtracting wall-clock timestamps: here the
// database's clock (db.DB.Now) jumps two hours forward while a job with a
// one-hour timeout runs.
func TestClockJump(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	d, err := db.Open(ctx, w.dbPath())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var jump atomic.Int64
	d.Now = func() time.Time { return time.Now().Add(time.Duration(jump.Load())) }
	s, err := supervisor.New(supervisor.Config{DB: d, Kind: "embedded", RuntimeDir: filepath.Join(w.run, "x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	argv := []string{helperBin, "e2e-helper", "until-eof"}
	j, err := s.Start(ctx, protocol.StartRequest{Job: db.NewJob{Argv: argv, Timeout: time.Hour, TTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	w.waitOutput(j.ID, "started")
	jump.Store(int64(2 * time.Hour))
	if _, err := s.Write(ctx, j.ID, nil, true, 0); err != nil {
		t.Fatal(err)
	}
	got := w.waitTerminal(j.ID, 30*time.Second)
	took := time.Since(began)
	if got.Status != "done" {
		t.Errorf("status %s (reason %q), want done: the wall clock passing the timeout must not end the job", got.Status, got.Reason)
	}
	if limit := (took + time.Second).Milliseconds(); got.RuntimeMS < 0 || got.RuntimeMS > limit {
		t.Errorf("runtime_ms = %d after a wall-clock jump; the job ran %d ms by the monotonic clock", got.RuntimeMS, took.Milliseconds())
	}
}

// The JSON contract (docs/json.md): durations are integers in
// milliseconds; signal names are "TERM", "KILL" ….
func TestJSONDurationsInMilliseconds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	began := time.Now()
	id := w.start("--timeout", "90s", "--ttl", "5m", "--", "true")
	j := w.waitTerminal(id, 30*time.Second)
	killed := w.start(helper("ready-idle")...)
	w.waitOutput(killed, "ready")
	w.kill(killed, "--grace", "5s")
	if k, _ := w.status(killed); k.Signal != "TERM" {
		t.Errorf("signal = %q, want \"TERM\" as docs/json.md shows", k.Signal)
	}
	took := time.Since(began)
	if j.TimeoutMS != 90_000 || j.TTLMS != 300_000 {
		t.Errorf("timeout_ms = %d, ttl_ms = %d; want 90000 and 300000", j.TimeoutMS, j.TTLMS)
	}
	if j.RuntimeMS > took.Milliseconds()+1 {
		t.Errorf("runtime_ms = %d for a job that ended within %d ms", j.RuntimeMS, took.Milliseconds())
	}
}
