package db

import (
	"context"
	"errors"
	"testing"

	"github.com/agentjobs/jobs/internal/vocab"
)

// enqueueTest makes a queued job of supervisor "sup" in queue q (or the
// scope's own when q is "").
func enqueueTest(t *testing.T, d *DB, q string, prio int, after ...Dep) Job {
	t.Helper()
	addSupervisor(t, d, "sup")
	j, err := d.CreateJobQueued(context.Background(), NewJob{
		Scope: "s", Command: "true", Argv: []string{"true"}, Cwd: "/", SupervisorID: "sup",
		Queue: q, Priority: prio, After: after,
	}, Limits{}, []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != vocab.StatusQueued {
		t.Fatalf("created %s, want queued", j.Status)
	}
	return j
}

// addSupervisor records supervisor id once (the jobs' foreign key).
func addSupervisor(t *testing.T, d *DB, id string) {
	t.Helper()
	if _, err := d.FindSupervisor(context.Background(), id); err == nil {
		return
	}
	if err := d.CreateSupervisor(context.Background(), Supervisor{ID: id, PID: 1, Kind: "detached", LockPath: "/nonexistent/" + id}); err != nil {
		t.Fatal(err)
	}
}

func claimIDs(t *testing.T, d *DB, lim Limits) (ids []string, failed []Job) {
	t.Helper()
	cl, failed, err := d.ClaimQueued(context.Background(), "sup", lim)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cl {
		if c.Job.Status != vocab.StatusStarting || string(c.Request) != `{"x":1}` {
			t.Fatalf("claimed %s with request %s", c.Job.Status, c.Request)
		}
		ids = append(ids, c.Job.ID)
	}
	return ids, failed
}

func TestClaimQueuedOrder(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	a := enqueueTest(t, d, "q", 0)
	b := enqueueTest(t, d, "q", 0)
	c := enqueueTest(t, d, "q", 5) // a higher priority goes first
	e := enqueueTest(t, d, "q", 0)
	if err := d.MoveToFront(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.MoveToFront(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	pos, err := d.QueuePositions(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if pos[c.ID] != 1 || pos[e.ID] != 2 || pos[a.ID] != 3 || pos[b.ID] != 4 {
		t.Fatalf("positions %v, want c e a b", pos)
	}
	paused := true
	if _, err := d.SetQueue(ctx, "s", "q", QueueUpdate{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := claimIDs(t, d, Limits{}); len(ids) != 0 {
		t.Fatalf("a paused queue gave %v", ids)
	}
	two, resumed := 2, false
	if _, err := d.SetQueue(ctx, "s", "q", QueueUpdate{Parallel: &two, Paused: &resumed}); err != nil {
		t.Fatal(err)
	}
	ids, _ := claimIDs(t, d, Limits{})
	if len(ids) != 2 || ids[0] != c.ID || ids[1] != e.ID {
		t.Fatalf("claimed %v, want %s %s", ids, c.ID, e.ID)
	}
	if ids, _ := claimIDs(t, d, Limits{}); len(ids) != 0 {
		t.Fatalf("a full queue gave %v", ids)
	}
	move(t, d, c.ID, vocab.StatusRunning, vocab.StatusDone)
	if ids, _ := claimIDs(t, d, Limits{}); len(ids) != 1 || ids[0] != a.ID {
		t.Fatalf("after one ended: %v, want %s", ids, a.ID)
	}
	qs, err := d.Queues(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Running != 2 || qs[0].Queued != 1 || qs[0].Parallel != 2 {
		t.Fatalf("queues %+v", qs)
	}
	// The scope's cap applies to queues too.
	if ids, _ := claimIDs(t, d, Limits{PerScope: 2}); len(ids) != 0 {
		t.Fatalf("past the scope's cap: %v", ids)
	}
}

func TestClaimQueuedDependencies(t *testing.T) {
	d, _ := openTest(t)
	first := create(t, d, "s", "")
	ok := enqueueTest(t, d, "", 0, Dep{ID: first.ID, OK: true})
	any := enqueueTest(t, d, "", 0, Dep{ID: first.ID})
	if ids, _ := claimIDs(t, d, Limits{}); len(ids) != 0 {
		t.Fatalf("claimed %v before their dependency ended", ids)
	}
	move(t, d, first.ID, vocab.StatusRunning, vocab.StatusFailed)
	ids, failed := claimIDs(t, d, Limits{})
	if len(ids) != 1 || ids[0] != any.ID {
		t.Fatalf("claimed %v, want %s", ids, any.ID)
	}
	if len(failed) != 1 || failed[0].ID != ok.ID || failed[0].Reason != "dependency "+first.ID+" failed" || failed[0].Status != vocab.StatusFailed {
		t.Fatalf("failed %+v", failed)
	}
	// A job cannot come after itself, nor after a job of another scope.
	_, err := d.CreateJobQueued(context.Background(), NewJob{ID: "selfselfself1", Scope: "s", Command: "true", Cwd: "/",
		After: []Dep{{ID: "selfselfself1"}}}, Limits{}, nil)
	if !errors.Is(err, vocab.ErrInvalid) {
		t.Fatalf("a job after itself: %v", err)
	}
	other := create(t, d, "other", "")
	_, err = d.CreateJobQueued(context.Background(), NewJob{Scope: "s", Command: "true", Cwd: "/",
		After: []Dep{{ID: other.ID}}}, Limits{}, nil)
	if !errors.Is(err, vocab.ErrNotFound) {
		t.Fatalf("a job after another scope's: %v", err)
	}
}

func TestAdoptQueued(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	j := enqueueTest(t, d, "q", 0)
	addSupervisor(t, d, "new")
	n, err := d.AdoptQueued(ctx, "new", func(Supervisor) bool { return false })
	if err != nil || n != 1 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	got, err := d.FindJobByID(ctx, j.ID)
	if err != nil || got.SupervisorID != "new" || got.Status != vocab.StatusQueued {
		t.Fatalf("after adoption: %+v %v", got, err)
	}
}
