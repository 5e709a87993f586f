package db

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// TestScopeIsolation: a job of another scope answers exactly like a job
// that does not exist, by id, prefix and name, and is not listed.
func TestScopeIsolation(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	mine := create(t, d, "me", "server")
	theirs := create(t, d, "them", "worker")

	for _, ref := range []string{theirs.ID, theirs.ID[:6], "worker", "nosuchjob"} {
		_, err := d.FindJob(ctx, "me", ref)
		if !errors.Is(err, vocab.ErrNotFound) {
			t.Errorf("FindJob(me, %q) = %v, want vocab.ErrNotFound", ref, err)
		}
		if want := "find job " + ref + ": not found"; err.Error() != want {
			t.Errorf("error %q, want %q (identical for missing and foreign jobs)", err, want)
		}
	}
	for _, ref := range []string{mine.ID, mine.ID[:6], "server"} {
		if j, err := d.FindJob(ctx, "me", ref); err != nil || j.ID != mine.ID {
			t.Errorf("FindJob(me, %q) = %s, %v", ref, j.ID, err)
		}
	}
	if jobs, err := d.FindJobs(ctx, Filter{Scope: "me"}); err != nil || len(jobs) != 1 || jobs[0].ID != mine.ID {
		t.Errorf("FindJobs(me) = %v, %v", ids(jobs), err)
	}
	if jobs, err := d.FindJobs(ctx, Filter{AllScopes: true}); err != nil || len(jobs) != 2 {
		t.Errorf("FindJobs(all scopes) = %v, %v", ids(jobs), err)
	}
	if evs, err := d.Events(ctx, EventFilter{Scope: "me"}); err != nil || len(evs) != 1 || evs[0].JobID != mine.ID {
		t.Errorf("Events(me) = %+v, %v", evs, err)
	}
	// Supervisors own jobs of every scope.
	if j, err := d.FindJobByID(ctx, theirs.ID); err != nil || j.Scope != "them" {
		t.Errorf("FindJobByID = %+v, %v", j, err)
	}
	if _, err := d.FindJobByID(ctx, theirs.ID[:6]); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("FindJobByID takes no prefix: %v", err)
	}
}

func ids(jobs []Job) []string {
	var s []string
	for _, j := range jobs {
		s = append(s, j.ID)
	}
	return s
}

func TestFindJobPrefix(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	a := createID(t, d, "s", "abcdaaaaaaaaa", "")
	b := createID(t, d, "s", "abcdbbbbbbbbb", "")
	c := createID(t, d, "s", "abceccccccccc", "")
	createID(t, d, "other", "abcdzzzzzzzzz", "") // another scope: no part in ambiguity

	tests := []struct {
		ref, want string
		err       error
	}{
		{"abcdaaaaaaaaa", a.ID, nil},
		{"ABCDAAAAAAAAA", a.ID, nil}, // ids are lower case; a shouted id still works
		{"abcda", a.ID, nil},
		{"abcdb", b.ID, nil},
		{"abce", c.ID, nil},
		{"abcd", "", vocab.ErrAmbiguous},
		{"abc", "", vocab.ErrNotFound}, // shorter than 4: never a prefix
		{"abcdz", "", vocab.ErrNotFound},
		{"abcd-", "", vocab.ErrNotFound},
		{"", "", vocab.ErrNotFound},
	}
	for _, tt := range tests {
		j, err := d.FindJob(ctx, "s", tt.ref)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("FindJob(%q) = %s, %v; want %v", tt.ref, j.ID, err, tt.err)
			}
			continue
		}
		if err != nil || j.ID != tt.want {
			t.Errorf("FindJob(%q) = %s, %v; want %s", tt.ref, j.ID, err, tt.want)
		}
	}

	_, err := d.FindJob(ctx, "s", "abcd")
	var amb *vocab.AmbiguousError
	if !errors.As(err, &amb) {
		t.Fatalf("err = %v, want *vocab.AmbiguousError", err)
	}
	if got := strings.Join(amb.Candidates, " "); got != a.ID+" "+b.ID {
		t.Errorf("candidates = %s", got)
	}
	for _, id := range []string{a.ID, b.ID} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name candidate %s", err, id)
		}
	}
	if strings.Contains(err.Error(), "abcdzzzzzzzzz") {
		t.Errorf("error %q names a job of another scope", err)
	}

	// A name beats an ambiguous prefix: it is an exact match.
	named := createID(t, d, "s", "qqqqqqqqqqqqq", "abcd")
	if j, err := d.FindJob(ctx, "s", "abcd"); err != nil || j.ID != named.ID {
		t.Errorf("FindJob(abcd) with a job named abcd = %s, %v", j.ID, err)
	}
}

func TestFindJobPrefixManyCandidates(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	for i := range maxCandidates + 3 {
		createID(t, d, "s", "zzzz"+strings.Repeat(string(rune('a'+i)), 9), "")
	}
	_, err := d.FindJob(context.Background(), "s", "zzzz")
	var amb *vocab.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != maxCandidates {
		t.Fatalf("err = %v; want %d candidates", err, maxCandidates)
	}
}

func TestFindJobByName(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	old := create(t, d, "s", "build")
	move(t, d, old.ID, vocab.StatusRunning, vocab.StatusDone)
	newer := create(t, d, "s", "build")
	create(t, d, "other", "build")

	j, err := d.FindJob(ctx, "s", "build")
	if err != nil || j.ID != newer.ID {
		t.Errorf("FindJob(build) = %s, %v; want the newest, %s", j.ID, err, newer.ID)
	}
	move(t, d, newer.ID, vocab.StatusFailed)
	if j, err := d.FindJob(ctx, "s", "build"); err != nil || j.ID != newer.ID {
		t.Errorf("FindJob(build) after it ended = %s, %v; want %s", j.ID, err, newer.ID)
	}
	if _, err := d.FindJob(ctx, "s", "Build"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("names are case-sensitive: %v", err)
	}
	jobs, err := d.FindJobs(ctx, Filter{Scope: "s", Name: "build"})
	if err != nil || len(jobs) != 2 || jobs[0].ID != newer.ID || jobs[1].ID != old.ID {
		t.Errorf("FindJobs(name build) = %v, %v", ids(jobs), err)
	}
}

func TestNameUniqueAmongActiveJobs(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	first := create(t, d, "s", "server")
	n := NewJob{Scope: "s", Name: "server", Command: "true"}

	for _, st := range []vocab.Status{vocab.StatusStarting, vocab.StatusRunning} {
		if st == vocab.StatusRunning {
			move(t, d, first.ID, vocab.StatusRunning)
		}
		_, err := d.CreateJob(ctx, n, Limits{})
		var taken *vocab.NameTakenError
		if !errors.As(err, &taken) || !errors.Is(err, vocab.ErrNameTaken) {
			t.Fatalf("second %q while the first is %s: %v", n.Name, st, err)
		}
		if taken.ID != first.ID || !strings.Contains(err.Error(), first.ID) {
			t.Errorf("error %q does not name the active job %s", err, first.ID)
		}
	}
	if _, err := d.CreateJob(ctx, NewJob{Scope: "other", Name: "server", Command: "true"}, Limits{}); err != nil {
		t.Errorf("same name in another scope: %v", err)
	}
	move(t, d, first.ID, vocab.StatusDone)
	second, err := d.CreateJob(ctx, n, Limits{})
	if err != nil {
		t.Fatalf("name of a finished job: %v", err)
	}
	if j, _ := d.FindJob(ctx, "s", "server"); j.ID != second.ID {
		t.Errorf("FindJob(server) = %s, want the new one %s", j.ID, second.ID)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	lim := Limits{PerScope: 2, Total: 3}
	mk := func(scope string) (Job, error) {
		return d.CreateJob(ctx, NewJob{Scope: scope, Command: "true"}, lim)
	}
	a1, _ := mk("a")
	a2, err := mk("a")
	if err != nil {
		t.Fatal(err)
	}
	move(t, d, a2.ID, vocab.StatusRunning)

	_, err = mk("a")
	var le *vocab.LimitError
	if !errors.As(err, &le) || !errors.Is(err, vocab.ErrLimit) {
		t.Fatalf("third job in scope a: %v", err)
	}
	if *le != (vocab.LimitError{Scope: "a", Running: 2, Max: 2}) {
		t.Errorf("limit error %+v", *le)
	}
	if !strings.Contains(err.Error(), `2 of at most 2 in scope "a"`) {
		t.Errorf("message %q", err)
	}

	if _, err := mk("b"); err != nil {
		t.Fatalf("first job in scope b: %v", err)
	}
	_, err = mk("b")
	if !errors.As(err, &le) || !le.Total || le.Running != 3 || le.Max != 3 {
		t.Fatalf("fourth job overall: %v", err)
	}
	if in, total, err := d.CountRunning(ctx, "a"); err != nil || in != 2 || total != 3 {
		t.Errorf("CountRunning(a) = %d, %d, %v", in, total, err)
	}

	move(t, d, a1.ID, vocab.StatusKilled)
	if _, err := mk("a"); err != nil {
		t.Errorf("after a job ended: %v", err)
	}
	if _, err := d.CreateJob(ctx, NewJob{Scope: "a", Command: "true"}, Limits{}); err != nil {
		t.Errorf("zero limits are unlimited: %v", err)
	}
}

func TestFindJobs(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	if err := d.CreateSupervisor(ctx, Supervisor{ID: "sup", Kind: "embedded", LockPath: "l"}); err != nil {
		t.Fatal(err)
	}
	j1 := create(t, d, "s", "")
	j2, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "x", SupervisorID: "sup"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	j3 := create(t, d, "s", "n")
	move(t, d, j1.ID, vocab.StatusRunning, vocab.StatusDone)
	move(t, d, j2.ID, vocab.StatusRunning)

	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all, newest first", Filter{Scope: "s"}, []string{j3.ID, j2.ID, j1.ID}},
		{"limit", Filter{Scope: "s", Limit: 2}, []string{j3.ID, j2.ID}},
		{"statuses", Filter{Scope: "s", Statuses: []vocab.Status{vocab.StatusStarting, vocab.StatusDone}}, []string{j3.ID, j1.ID}},
		{"supervisor", Filter{AllScopes: true, SupervisorID: "sup"}, []string{j2.ID}},
		{"name", Filter{Scope: "s", Name: "n"}, []string{j3.ID}},
		{"empty scope", Filter{}, nil},
	}
	for _, tt := range tests {
		jobs, err := d.FindJobs(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ids(jobs), " "); got != strings.Join(tt.want, " ") {
			t.Errorf("%s: got %s, want %s", tt.name, got, strings.Join(tt.want, " "))
		}
	}
}

func TestSetters(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	j := create(t, d, "s", "")

	if err := d.SetStdin(ctx, j.ID, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := d.SetStdin(ctx, j.ID, "ajar"); err == nil {
		t.Error("SetStdin accepted an unknown state")
	}
	if err := d.SetStdin(ctx, "nosuchjob", "closed"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("SetStdin of a missing job: %v", err)
	}

	later := epoch.Add(time.Hour)
	c.Set(later)
	if err := d.Touch(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch(ctx, "nosuchjob"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("Touch of a missing job: %v", err)
	}

	if ok, err := d.AdvanceReadCursor(ctx, j.ID, 0, 100); !ok || err != nil {
		t.Errorf("advance 0→100: %v, %v", ok, err)
	}
	if ok, err := d.AdvanceReadCursor(ctx, j.ID, 0, 50); ok || err != nil {
		t.Errorf("advance from a stale cursor: %v, %v; want false, nil", ok, err)
	}
	if ok, err := d.AdvanceReadCursor(ctx, j.ID, 100, 150); !ok || err != nil {
		t.Errorf("advance 100→150: %v, %v", ok, err)
	}
	if _, err := d.AdvanceReadCursor(ctx, "nosuchjob", 0, 1); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("advance a missing job: %v", err)
	}

	got, err := d.FindJobByID(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stdin != "closed" || got.ReadCursor != 150 || !got.LastAccessAt.Equal(later.Add(time.Millisecond)) {
		t.Errorf("stdin %s cursor %d last access %v", got.Stdin, got.ReadCursor, got.LastAccessAt)
	}
}

func TestExpiredJobs(t *testing.T) {
	t.Parallel()
	d, c := openTest(t)
	ctx := context.Background()
	mk := func(ttl time.Duration) Job {
		j, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "true", TTL: ttl}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	finished := mk(time.Minute)
	forever := mk(0)
	running := mk(time.Minute)
	c.Set(epoch.Add(time.Hour))
	move(t, d, finished.ID, vocab.StatusRunning)
	end := move(t, d, finished.ID, vocab.StatusDone).EndedAt
	move(t, d, forever.ID, vocab.StatusFailed)
	move(t, d, running.ID, vocab.StatusRunning)

	check := func(now time.Time, want ...string) {
		t.Helper()
		jobs, err := d.ExpiredJobs(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ids(jobs), " "); got != strings.Join(want, " ") {
			t.Errorf("ExpiredJobs(%s) = %q, want %q", FormatTime(now), got, strings.Join(want, " "))
		}
	}
	check(end.Add(59 * time.Second))
	check(end.Add(time.Minute)) // last access + ttl < now, strictly
	check(end.Add(time.Minute+time.Millisecond), finished.ID)
	check(end.Add(24*time.Hour), finished.ID) // never the running one or the ttl-0 one

	// An access restarts the clock.
	c.Set(end.Add(30 * time.Second))
	if err := d.Touch(ctx, finished.ID); err != nil {
		t.Fatal(err)
	}
	check(end.Add(time.Minute + time.Millisecond))
	check(end.Add(91*time.Second), finished.ID)
}
