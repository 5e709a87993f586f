package db

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

func TestAddEventAndFilter(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	a := create(t, d, "s", "")
	b := create(t, d, "s", "")
	o := create(t, d, "other", "")

	e, err := d.AddEvent(ctx, Event{JobID: a.ID, Kind: "output_dropped", Detail: json.RawMessage(`{"bytes":4096}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == 0 || e.Scope != "s" || e.At.IsZero() || string(e.Detail) != `{"bytes":4096}` {
		t.Errorf("added event %+v", e)
	}
	if _, err := d.AddEvent(ctx, Event{JobID: b.ID, Kind: "note"}); err != nil {
		t.Fatal(err)
	}

	bad := []Event{
		{JobID: a.ID, Kind: "transition", To: vocab.StatusDone},
		{JobID: a.ID, Kind: "gossip"},
		{JobID: a.ID, Kind: "note", To: vocab.StatusDone},
		{JobID: a.ID, Kind: "note", Detail: json.RawMessage(`{`)},
	}
	for _, ev := range bad {
		if _, err := d.AddEvent(ctx, ev); err == nil {
			t.Errorf("AddEvent(%+v) accepted", ev)
		}
	}
	if _, err := d.AddEvent(ctx, Event{JobID: "gone", Kind: "hook"}); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("event of a missing job without a scope: %v", err)
	}
	// With its scope given, an event may name a job that is gone (a hook
	// that ran after its job was removed).
	if _, err := d.AddEvent(ctx, Event{JobID: "gone", Scope: "s", Kind: "hook"}); err != nil {
		t.Errorf("event with a scope for a deleted job: %v", err)
	}

	count := func(f EventFilter) int {
		t.Helper()
		evs, err := d.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].ID <= evs[i-1].ID {
				t.Fatalf("events out of order: %d after %d", evs[i].ID, evs[i-1].ID)
			}
		}
		return len(evs)
	}
	// s: 2 creations, output_dropped, note, hook; other: 1 creation.
	tests := []struct {
		name string
		f    EventFilter
		want int
	}{
		{"scope", EventFilter{Scope: "s"}, 5},
		{"all scopes", EventFilter{AllScopes: true}, 6},
		{"job", EventFilter{Scope: "s", JobID: a.ID}, 2},
		{"job of another scope", EventFilter{Scope: "s", JobID: o.ID}, 0},
		{"since", EventFilter{Scope: "s", SinceID: e.ID}, 2},
		{"limit", EventFilter{Scope: "s", Limit: 3}, 3},
	}
	for _, tt := range tests {
		if got := count(tt.f); got != tt.want {
			t.Errorf("%s: %d events, want %d", tt.name, got, tt.want)
		}
	}
}

// TestEventsOutliveJobs deletes a job with output: its chunks go, its
// events stay, and the history view still shows its command.
func TestEventsOutliveJobs(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	j := create(t, d, "s", "")
	move(t, d, j.ID, vocab.StatusRunning, vocab.StatusDone)
	if _, err := d.Exec(`INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES (?, 0, 'stdout', 0, 0, 1, ?, x'68690a')`, j.ID, FormatTime(epoch)); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteJob(ctx, j.ID); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	var chunks int
	if err := d.Get(&chunks, `SELECT count(*) FROM chunks WHERE job_id = ?`, j.ID); err != nil || chunks != 0 {
		t.Errorf("chunks after delete: %d, %v", chunks, err)
	}
	evs, err := d.Events(ctx, EventFilter{Scope: "s", JobID: j.ID})
	// Created, running, done, and the note of the deletion.
	if err != nil || len(evs) != 4 {
		t.Fatalf("events after delete: %d, %v", len(evs), err)
	}
	if last := evs[len(evs)-1]; last.Kind != "note" || !strings.Contains(string(last.Detail), `"by":"rm"`) {
		t.Errorf("last event %+v, want the deletion note", last)
	}
	var commands []string
	if err := d.Select(&commands, `SELECT command FROM job_history WHERE job_id = ? ORDER BY event_id`, j.ID); err != nil {
		t.Fatal(err)
	}
	if strings.Join(commands, "|") != "echo hi|echo hi|echo hi|echo hi" {
		t.Errorf("job_history commands of a deleted job: %q", commands)
	}
}

func TestDeleteEventsBefore(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	old := create(t, d, "s", "") // event at epoch
	c.Set(epoch.Add(40 * 24 * time.Hour))
	move(t, d, old.ID, vocab.StatusRunning) // a recent event of the same job
	create(t, d, "s", "")
	if err := d.DeleteJob(ctx, old.ID); err != nil {
		t.Fatal(err)
	}

	cut := epoch.Add(10 * 24 * time.Hour)
	n, err := d.DeleteEventsBefore(ctx, cut)
	if err != nil || n != 1 {
		t.Fatalf("DeleteEventsBefore = %d, %v; want 1", n, err)
	}
	evs, err := d.Events(ctx, EventFilter{Scope: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.At.Before(cut) {
			t.Errorf("event %d at %v survived", e.ID, e.At)
		}
	}
	// The recent transition, the second job's creation, the deletion note.
	if len(evs) != 3 {
		t.Errorf("%d events left, want 3", len(evs))
	}
	if n, err := d.DeleteEventsBefore(ctx, cut); err != nil || n != 0 {
		t.Errorf("second run = %d, %v", n, err)
	}
}

func TestSupervisors(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	s := Supervisor{ID: "sup1", PID: 321, Host: "box", Kind: "detached", LockPath: "/run/x.lock", SocketPath: "/run/x.sock", Version: "v1"}
	if err := d.CreateSupervisor(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateSupervisor(ctx, Supervisor{ID: "sup2", Kind: "embedded", LockPath: "l2"}); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateSupervisor(ctx, Supervisor{ID: "sup3", Kind: "thread", LockPath: "l3"}); err == nil {
		t.Error("unknown kind accepted")
	}
	got, err := d.FindSupervisor(ctx, "sup1")
	if err != nil {
		t.Fatal(err)
	}
	s.StartedAt = epoch.Add(time.Millisecond)
	if got.EndedAt != nil || got.ID != s.ID || got.PID != s.PID || got.Host != s.Host || got.Kind != s.Kind ||
		got.LockPath != s.LockPath || got.SocketPath != s.SocketPath || got.Version != s.Version || !got.StartedAt.Equal(s.StartedAt) {
		t.Errorf("FindSupervisor = %+v, want %+v", got, s)
	}
	if _, err := d.FindSupervisor(ctx, "nobody"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("FindSupervisor(nobody) = %v", err)
	}

	j, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "true", SupervisorID: "sup1"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	j2, err := d.CreateJob(ctx, NewJob{Scope: "t", Command: "true", SupervisorID: "sup2"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	move(t, d, j2.ID, vocab.StatusFailed)
	active, err := d.SupervisorsWithActiveJobs(ctx)
	if err != nil || len(active) != 1 || active[0].ID != "sup1" {
		t.Errorf("SupervisorsWithActiveJobs = %+v, %v", active, err)
	}

	c.Set(epoch.Add(time.Hour))
	if err := d.EndSupervisor(ctx, "sup1"); err != nil {
		t.Fatal(err)
	}
	c.Set(epoch.Add(2 * time.Hour))
	if err := d.EndSupervisor(ctx, "sup1"); err != nil {
		t.Errorf("second end: %v", err)
	}
	if err := d.EndSupervisor(ctx, "nobody"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("EndSupervisor(nobody) = %v", err)
	}
	got, _ = d.FindSupervisor(ctx, "sup1")
	if got.EndedAt == nil || !got.EndedAt.Equal(epoch.Add(time.Hour+time.Millisecond)) {
		t.Errorf("ended_at = %v, want the first end", got.EndedAt)
	}
	// An ended supervisor with a running job is exactly what the janitor
	// looks for.
	if active, _ := d.SupervisorsWithActiveJobs(ctx); len(active) != 1 {
		t.Errorf("ended supervisor with an active job not listed")
	}
	move(t, d, j.ID, vocab.StatusLost)
	if active, _ := d.SupervisorsWithActiveJobs(ctx); len(active) != 0 {
		t.Errorf("supervisors listed with no active job: %+v", active)
	}
}

// TestViews reads every audit view over a small history.
func TestViews(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	if err := d.CreateSupervisor(ctx, Supervisor{ID: "sup", PID: 9, Kind: "detached", LockPath: "l"}); err != nil {
		t.Fatal(err)
	}
	a := create(t, d, "s", "web")
	b := create(t, d, "s", "")
	r, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "sleep 9", SupervisorID: "sup"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	move(t, d, a.ID, vocab.StatusRunning, vocab.StatusDone)
	move(t, d, b.ID, vocab.StatusRunning, vocab.StatusTimedOut)
	move(t, d, r.ID, vocab.StatusRunning)

	var summary []struct {
		ID       string   `db:"id"`
		Name     string   `db:"name"`
		Status   string   `db:"status"`
		Duration *float64 `db:"duration_s"`
	}
	if err := d.Select(&summary, `SELECT id, name, status, duration_s FROM job_summary ORDER BY created_at`); err != nil {
		t.Fatal(err)
	}
	if len(summary) != 3 || summary[0].Name != "web" || summary[0].Duration == nil || *summary[0].Duration != 0.001 {
		t.Errorf("job_summary = %+v", summary)
	}

	var active []struct {
		ID     string `db:"id"`
		SupPID int    `db:"supervisor_pid"`
	}
	if err := d.Select(&active, `SELECT id, supervisor_pid FROM active_jobs`); err != nil {
		t.Fatal(err)
	}
	if len(active) != 1 || active[0].ID != r.ID || active[0].SupPID != 9 {
		t.Errorf("active_jobs = %+v", active)
	}

	var daily []struct {
		Scope    string `db:"scope"`
		Day      string `db:"day"`
		Created  int    `db:"created"`
		Done     int    `db:"done"`
		TimedOut int    `db:"timed_out"`
	}
	if err := d.Select(&daily, `SELECT scope, day, created, done, timed_out FROM scope_daily`); err != nil {
		t.Fatal(err)
	}
	if len(daily) != 1 || daily[0].Day != "2026-03-04" || daily[0].Created != 3 || daily[0].Done != 1 || daily[0].TimedOut != 1 {
		t.Errorf("scope_daily = %+v", daily)
	}

	var history int
	if err := d.Get(&history, `SELECT count(*) FROM job_history WHERE command IS NOT NULL`); err != nil || history != 8 {
		t.Errorf("job_history rows with a command = %d, %v; want 8", history, err)
	}
}

// TestEventCursorAt: the cursor for a time is followed by every event
// stamped from then on, and by none of those committed before the first
// of them; with no event that late it is the newest event; with none at
// all, 0.
func TestEventCursorAt(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	if id, err := d.EventCursorAt(ctx, epoch); err != nil || id != 0 {
		t.Fatalf("EventCursorAt on no events = %d, %v; want 0", id, err)
	}
	create(t, d, "s", "")
	create(t, d, "s", "")
	evs, err := d.Events(ctx, EventFilter{AllScopes: true})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %v, %v", evs, err)
	}
	newest := evs[1].ID
	c.Set(epoch.Add(time.Hour))
	if id, err := d.EventCursorAt(ctx, epoch.Add(time.Minute)); err != nil || id != newest {
		t.Fatalf("EventCursorAt after every event = %d, %v; want the newest, %d", id, err, newest)
	}
	later := create(t, d, "s", "")
	create(t, d, "other", "")
	id, err := d.EventCursorAt(ctx, epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	after, err := d.Events(ctx, EventFilter{AllScopes: true, SinceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || after[0].JobID != later.ID {
		t.Errorf("events after the cursor %d: %+v; want the two created an hour later", id, after)
	}
}
