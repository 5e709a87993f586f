package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

func TestNewID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if len(id) != 13 || !isIDText(id) {
			t.Fatalf("id %q: want 13 lower-case base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s               vocab.Status
		valid, terminal bool
	}{
		{vocab.StatusStarting, true, false},
		{vocab.StatusRunning, true, false},
		{vocab.StatusDone, true, true},
		{vocab.StatusFailed, true, true},
		{vocab.StatusKilled, true, true},
		{vocab.StatusTimedOut, true, true},
		{vocab.StatusLost, true, true},
		{"", false, false},
		{"Done", false, false},
	}
	for _, tt := range tests {
		if got := tt.s.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v", tt.s, got)
		}
		if got := tt.s.Terminal(); got != tt.terminal {
			t.Errorf("%q.Terminal() = %v", tt.s, got)
		}
	}
}

func TestCreateJob(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	j, err := d.CreateJob(ctx, NewJob{
		Scope:     "agent-1",
		Name:      "build",
		Label:     "make it",
		Command:   "make -j4",
		Argv:      []string{"/bin/sh", "-c", "make -j4"},
		Cwd:       "/src",
		EnvNames:  []string{"GOFLAGS", "TOKEN"},
		OnExit:    "notify",
		Color:     true,
		Timeout:   90 * time.Second,
		TTL:       1500 * time.Microsecond, // rounds up, never to 0 ("forever")
		MaxOutput: 1 << 20,
	}, Limits{PerScope: 5, Total: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.ID) != 13 {
		t.Errorf("generated id %q", j.ID)
	}
	want := Job{
		ID: j.ID, Scope: "agent-1", Name: "build", Label: "make it", Command: "make -j4",
		Argv: []string{"/bin/sh", "-c", "make -j4"}, Cwd: "/src", EnvNames: []string{"GOFLAGS", "TOKEN"},
		Mode: "pipe", Status: vocab.StatusStarting, Stdin: "pipe", Color: true, OnExit: "notify",
		CreatedAt: epoch.Add(time.Millisecond), LastAccessAt: epoch.Add(time.Millisecond),
		Timeout: 90 * time.Second, TTL: 2 * time.Millisecond, MaxOutput: 1 << 20,
	}
	if got := fmt.Sprintf("%+v", j); got != fmt.Sprintf("%+v", want) {
		t.Errorf("created job\n got %s\nwant %s", got, fmt.Sprintf("%+v", want))
	}

	var envNames string
	if err := d.Get(&envNames, `SELECT env_names FROM jobs WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	if envNames != `["GOFLAGS","TOKEN"]` {
		t.Errorf("env_names column = %s", envNames)
	}

	evs, err := d.Events(ctx, EventFilter{Scope: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("events after create: %d", len(evs))
	}
	e := evs[0]
	if e.Kind != "transition" || e.From != "" || e.To != vocab.StatusStarting || e.JobID != j.ID || !e.At.Equal(j.CreatedAt) {
		t.Errorf("creation event %+v", e)
	}
	var detail map[string]any
	if err := json.Unmarshal(e.Detail, &detail); err != nil || detail["command"] != "make -j4" || detail["name"] != "build" {
		t.Errorf("creation event detail %s, %v", e.Detail, err)
	}
	var from *string
	if err := d.Get(&from, `SELECT from_status FROM events WHERE id = ?`, e.ID); err != nil || from != nil {
		t.Errorf("from_status of the creation event = %v, %v; want NULL", from, err)
	}
}

func TestCreateJobRejects(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	ok := NewJob{Scope: "s", Command: "true"}
	tests := []struct {
		name string
		edit func(*NewJob)
		want string
	}{
		{"no scope", func(n *NewJob) { n.Scope = "" }, "empty scope"},
		{"no command", func(n *NewJob) { n.Command = "" }, "empty command"},
		{"bad mode", func(n *NewJob) { n.Mode = "screen" }, "mode"},
		{"bad stdin", func(n *NewJob) { n.Stdin = "open" }, "stdin"},
		{"negative timeout", func(n *NewJob) { n.Timeout = -time.Second }, "negative timeout"},
		{"negative ttl", func(n *NewJob) { n.TTL = -time.Second }, "negative ttl"},
		{"negative cap", func(n *NewJob) { n.MaxOutput = -1 }, "negative output cap"},
		{"unknown supervisor", func(n *NewJob) { n.SupervisorID = "nobody" }, "FOREIGN KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.edit(&n)
			_, err := d.CreateJob(ctx, n, Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "create job: ") {
				t.Errorf("err = %v, want \"create job: …%s…\"", err, tt.want)
			}
		})
	}
	if jobs, _ := d.FindJobs(ctx, Filter{AllScopes: true}); len(jobs) != 0 {
		t.Errorf("%d jobs left behind by rejected creates", len(jobs))
	}
	if evs, _ := d.Events(ctx, EventFilter{AllScopes: true}); len(evs) != 0 {
		t.Errorf("%d events left behind by rejected creates", len(evs))
	}
}

// reach drives a new job to status s along allowed moves.
func reach(t *testing.T, d *DB, s vocab.Status) Job {
	t.Helper()
	j := create(t, d, "s", "")
	switch s {
	case vocab.StatusStarting:
		return j
	case vocab.StatusRunning:
		return move(t, d, j.ID, vocab.StatusRunning)
	default:
		return move(t, d, j.ID, vocab.StatusRunning, s)
	}
}

// TestTransitions tries every pair of statuses (and some that are not
// statuses) and checks the state machine, the row and the event.
func TestTransitions(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	all := []vocab.Status{vocab.StatusStarting, vocab.StatusRunning, vocab.StatusDone, vocab.StatusFailed, vocab.StatusKilled, vocab.StatusTimedOut, vocab.StatusLost}
	allowed := map[[2]vocab.Status]bool{
		{vocab.StatusStarting, vocab.StatusRunning}: true,
		{vocab.StatusStarting, vocab.StatusFailed}:  true,
		{vocab.StatusStarting, vocab.StatusKilled}:  true,
		{vocab.StatusStarting, vocab.StatusLost}:    true,
		{vocab.StatusRunning, vocab.StatusDone}:     true,
		{vocab.StatusRunning, vocab.StatusFailed}:   true,
		{vocab.StatusRunning, vocab.StatusKilled}:   true,
		{vocab.StatusRunning, vocab.StatusTimedOut}: true,
		{vocab.StatusRunning, vocab.StatusLost}:     true,
	}
	// eventsAt is how many events a job reached by reach(s) has.
	eventsAt := func(s vocab.Status) int {
		switch s {
		case vocab.StatusStarting:
			return 1
		case vocab.StatusRunning:
			return 2
		}
		return 3
	}
	targets := append(slices.Clone(all), "", "paused")
	for _, from := range all {
		// A refused move changes nothing, so one job in status from serves
		// every refused target; allowed moves each get a fresh job.
		refused := reach(t, d, from)
		for _, to := range targets {
			ok := allowed[[2]vocab.Status{from, to}]
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				before := refused
				if ok {
					before = reach(t, d, from)
				}
				got, err := d.Transition(ctx, before.ID, Transition{To: to, PID: 7, PGID: 7})
				evs, _ := d.Events(ctx, EventFilter{Scope: "s", JobID: before.ID})
				if !ok {
					if !errors.Is(err, vocab.ErrInvalidTransition) {
						t.Fatalf("err = %v, want vocab.ErrInvalidTransition", err)
					}
					if msg := err.Error(); !strings.Contains(msg, "from "+string(from)+" to "+string(to)) {
						t.Errorf("error %q does not name both statuses", msg)
					}
					now, err := d.FindJobByID(ctx, before.ID)
					if err != nil {
						t.Fatal(err)
					}
					if now.Status != from || len(evs) != eventsAt(from) {
						t.Errorf("refused move changed something: status %s, %d events", now.Status, len(evs))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != to {
					t.Errorf("status = %s", got.Status)
				}
				if got.EndedAt != nil != to.Terminal() {
					t.Errorf("ended_at = %v for %s", got.EndedAt, to)
				}
				if to == vocab.StatusRunning && (got.StartedAt == nil || got.PID != 7 || got.PGID != 7) {
					t.Errorf("running job: started_at %v pid %d pgid %d", got.StartedAt, got.PID, got.PGID)
				}
				if to.Terminal() && !got.LastAccessAt.Equal(*got.EndedAt) {
					t.Errorf("last_access_at %v, want the end time %v (ttl counts from the end)", got.LastAccessAt, *got.EndedAt)
				}
				if len(evs) != eventsAt(from)+1 {
					t.Fatalf("%d events after the move, want %d", len(evs), eventsAt(from)+1)
				}
				e := evs[len(evs)-1]
				if e.Kind != "transition" || e.From != from || e.To != to || e.Scope != "s" {
					t.Errorf("event %+v", e)
				}
			})
		}
	}
}

func TestTransitionRecordsExit(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	j := create(t, d, "s", "")
	startAt := epoch.Add(time.Hour)
	j, err := d.Transition(ctx, j.ID, Transition{To: vocab.StatusRunning, At: startAt, PID: 100, PGID: 101, PIDStart: 555})
	if err != nil {
		t.Fatal(err)
	}
	if !j.StartedAt.Equal(startAt) || j.PIDStart != 555 {
		t.Errorf("running: %+v", j)
	}
	c.Set(epoch.Add(2 * time.Hour))
	code := 137
	j, err = d.Transition(ctx, j.ID, Transition{
		To: vocab.StatusFailed, ExitCode: &code, Signal: "SIGKILL", Reason: "killed by the kernel",
		Usage:  &Usage{UserCPU: 1500 * time.Millisecond, SysCPU: 250 * time.Millisecond, MaxRSSKB: 2048},
		Detail: map[string]any{"survivors": 0, "signal": "overridden"},
	})
	if err != nil {
		t.Fatal(err)
	}
	end := epoch.Add(2*time.Hour + time.Millisecond)
	if j.ExitCode == nil || *j.ExitCode != 137 || j.Signal != "SIGKILL" || j.Reason != "killed by the kernel" ||
		j.UserCPU != 1500*time.Millisecond || j.SysCPU != 250*time.Millisecond || j.MaxRSSKB != 2048 ||
		!j.EndedAt.Equal(end) {
		t.Errorf("failed job: %+v", j)
	}
	evs, err := d.Events(ctx, EventFilter{Scope: "s", JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	var detail map[string]any
	if err := json.Unmarshal(evs[len(evs)-1].Detail, &detail); err != nil {
		t.Fatal(err)
	}
	if detail["exit_code"] != 137.0 || detail["signal"] != "SIGKILL" || detail["survivors"] != 0.0 || detail["reason"] != "killed by the kernel" {
		t.Errorf("event detail %v", detail)
	}
	if err := json.Unmarshal(evs[1].Detail, &detail); err != nil || detail["pid"] != 100.0 {
		t.Errorf("running event detail %s", evs[1].Detail)
	}

	if _, err := d.Transition(ctx, "nosuchjob", Transition{To: vocab.StatusRunning}); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("transition of a missing job: %v", err)
	}
}

// TestTransitionConcurrent races two different terminal moves: exactly one
// wins, the other is vocab.ErrInvalidTransition, and there is one terminal event.
func TestTransitionConcurrent(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	for range 5 {
		j := reach(t, d, vocab.StatusRunning)
		errs := make(chan error, 2)
		for _, to := range []vocab.Status{vocab.StatusDone, vocab.StatusKilled} {
			go func() {
				_, err := d.Transition(ctx, j.ID, Transition{To: to})
				errs <- err
			}()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("two racing moves: %v, %v; want one success", e1, e2)
		}
		if e := errors.Join(e1, e2); !errors.Is(e, vocab.ErrInvalidTransition) {
			t.Errorf("loser: %v", e)
		}
		evs, _ := d.Events(ctx, EventFilter{Scope: "s", JobID: j.ID})
		if len(evs) != 3 {
			t.Errorf("%d events, want creation, running and one end", len(evs))
		}
	}
}

// TestSchemaChecks writes bad rows with raw SQL: the schema itself must
// refuse them, whatever the Go code does.
func TestSchemaChecks(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	running := reach(t, d, vocab.StatusRunning)
	starting := reach(t, d, vocab.StatusStarting)
	done := reach(t, d, vocab.StatusDone)
	tests := []struct {
		name, sql string
		args      []any
	}{
		{"unknown status", `UPDATE jobs SET status = 'paused' WHERE id = ?`, []any{running.ID}},
		{"terminal without ended_at", `UPDATE jobs SET status = 'done' WHERE id = ?`, []any{running.ID}},
		{"active with ended_at", `UPDATE jobs SET ended_at = '2026-01-01T00:00:00.000Z' WHERE id = ?`, []any{starting.ID}},
		{"ended_at cleared on a finished job", `UPDATE jobs SET ended_at = NULL WHERE id = ?`, []any{done.ID}},
		{"running without started_at", `UPDATE jobs SET status = 'running' WHERE id = ?`, []any{starting.ID}},
		{"bad mode", `UPDATE jobs SET mode = 'screen' WHERE id = ?`, []any{starting.ID}},
		{"bad stdin", `UPDATE jobs SET stdin = 'open' WHERE id = ?`, []any{starting.ID}},
		{"argv not JSON", `UPDATE jobs SET argv = 'sh -c' WHERE id = ?`, []any{starting.ID}},
		{"negative ttl", `UPDATE jobs SET ttl_ms = -1 WHERE id = ?`, []any{starting.ID}},
		{"STRICT type", `UPDATE jobs SET pid = 'abc' WHERE id = ?`, []any{starting.ID}},
		{"second active job with a name", `INSERT INTO jobs (id, scope, name, command, argv, cwd, created_at, last_access_at)
			SELECT 'dup' || id, scope, 'x', command, argv, cwd, created_at, last_access_at FROM jobs WHERE id IN (?, ?)`,
			[]any{running.ID, starting.ID}},
		{"transition event without to_status", `INSERT INTO events (job_id, scope, at, kind) VALUES (?, 's', '2026-01-01T00:00:00.000Z', 'transition')`, []any{running.ID}},
		{"unknown event kind", `INSERT INTO events (job_id, scope, at, kind, to_status) VALUES (?, 's', '2026-01-01T00:00:00.000Z', 'gossip', 'done')`, []any{running.ID}},
		{"chunk of a missing job", `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
			VALUES (?, 0, 'stdout', 0, 0, 0, '2026-01-01T00:00:00.000Z', x'00')`, []any{"nosuchjob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Exec(tt.sql, tt.args...); err == nil {
				t.Error("the schema accepted it")
			}
		})
	}
	// The checks above must not have been vacuous: the same rows are fine
	// when they are consistent.
	if _, err := d.Exec(`UPDATE jobs SET status = 'done', ended_at = '2026-01-01T00:00:00.000Z' WHERE id = ?`, running.ID); err != nil {
		t.Errorf("consistent terminal update: %v", err)
	}
}

// A terminal move records the output totals it is given, never lowering
// what the rows already say, and leaves them alone without totals.
func TestTransitionRaisesOutputTotals(t *testing.T) {
	d, _ := openTest(t)
	ctx := context.Background()
	a, b := create(t, d, "s", ""), create(t, d, "s", "")
	for _, j := range []Job{a, b} {
		if _, err := d.Transition(ctx, j.ID, Transition{To: vocab.StatusRunning, PID: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Exec(`UPDATE jobs SET output_bytes = 200, output_lines = 9 WHERE id = ?`, b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := d.Transition(ctx, a.ID, Transition{To: vocab.StatusDone, Output: &OutputTotals{Bytes: 100, Lines: 3, Dropped: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputBytes != 100 || got.OutputLines != 3 || got.DroppedBytes != 10 {
		t.Errorf("job a: %d bytes, %d lines, %d dropped; want 100, 3, 10", got.OutputBytes, got.OutputLines, got.DroppedBytes)
	}
	got, err = d.Transition(ctx, b.ID, Transition{To: vocab.StatusDone, Output: &OutputTotals{Bytes: 100, Lines: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputBytes != 200 || got.OutputLines != 9 || got.DroppedBytes != 0 {
		t.Errorf("job b: %d bytes, %d lines, %d dropped; want 200, 9, 0 (never lowered)", got.OutputBytes, got.OutputLines, got.DroppedBytes)
	}
	c := create(t, d, "s", "")
	got, err = d.Transition(ctx, c.ID, Transition{To: vocab.StatusFailed, Reason: "no"})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputBytes != 0 || got.OutputLines != 0 || got.DroppedBytes != 0 || got.Reason != "no" {
		t.Errorf("job c without totals: %+v", got)
	}
}
