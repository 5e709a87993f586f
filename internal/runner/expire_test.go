package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/internal/runner"
)

// TestJanitorExpiryKeepsWritersMoving: while the janitor deletes many
// expired jobs (10 KiB of output each) and their events, another
// connection writes a small event every 5 ms, as a supervisor writes
// output and statuses. Every expired job is deleted, nothing else is, and
// the longest any write waited is logged. The janitor commits every
// db.BatchBudget and pauses db.BatchRest between its transactions; with
// JOBS_EXPIRE_STALL_MAX set (e.g. 50ms, on a quiet machine) the test fails
// when a write waited longer. JOBS_EXPIRE_JOBS sets the count (default
// 1,000; the figure is 100,000).
func TestJanitorExpiryKeepsWritersMoving(t *testing.T) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("JOBS_EXPIRE_JOBS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	old := time.Now().Add(-60 * 24 * time.Hour) // past the events' retention too
	if err := dbtest.Fill(ctx, d, dbtest.History{Scope: "s", Jobs: n, ChunkBytes: 10 << 10, TTL: time.Millisecond, End: old}); err != nil {
		t.Fatal(err)
	}
	if err := dbtest.Fill(ctx, d, dbtest.History{Scope: "keep", Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	keep, err := d.FindJobs(ctx, db.Filter{Scope: "keep"})
	if err != nil || len(keep) != 1 {
		t.Fatalf("find the kept job: %v %v", keep, err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var worst time.Duration
	writes := 0
	wg.Add(1)
	go func() { // the writer; stopped and waited for below
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond) // a job's output, flushed now and then
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if _, err := d.AddEvent(ctx, db.Event{JobID: keep[0].ID, Scope: "keep", Kind: "note"}); err != nil {
				t.Errorf("write during expiry after %v: %v", time.Since(t0), err)
				return
			}
			worst = max(worst, time.Since(t0))
			writes++
		}
	}()
	t0 := time.Now()
	res, err := runner.RunJanitor(ctx, d, 30*24*time.Hour)
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != n || res.EventsDeleted != int64(3*n) {
		t.Errorf("janitor deleted %d jobs and %d events, want %d and %d", res.Deleted, res.EventsDeleted, n, 3*n)
	}
	var chunks, jobsLeft int
	if err := d.Get(&chunks, `SELECT count(*) FROM chunks`); err != nil {
		t.Fatal(err)
	}
	if err := d.Get(&jobsLeft, `SELECT count(*) FROM jobs`); err != nil {
		t.Fatal(err)
	}
	if chunks != 1 || jobsLeft != 1 {
		t.Errorf("%d chunks and %d jobs left, want the kept job's 1 and 1", chunks, jobsLeft)
	}
	t.Logf("expired %d jobs in %v; %d writes meanwhile, the longest waited %v", n, took.Round(time.Millisecond), writes, worst.Round(time.Millisecond))
	if v := os.Getenv("JOBS_EXPIRE_STALL_MAX"); v != "" {
		limit, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("JOBS_EXPIRE_STALL_MAX: %v", err)
		}
		if worst > limit {
			t.Errorf("a write waited %v behind the janitor, want at most %v", worst, limit)
		}
	}
}
