package sweep_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/testlong"
)

// TestJanitorExpiryKeepsWritersMoving: while the janitor deletes many
// expired jobs (10 KiB of output each) and their events, another
// connection writes a small event every 5 ms, as a supervisor writes
// output and statuses. Every expired job is deleted, nothing else is, and
// the longest any write waited is logged (the bench's expiry workload
// measures it against a writer alone; TestJanitorBatchesAreBounded checks
// the bound of each transaction). JOBS_EXPIRE_JOBS sets the count
// (default 300, 1,000 with the long sizes).
func TestJanitorExpiryKeepsWritersMoving(t *testing.T) {
	n := testlong.Pick(300, 1000)
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
	res, err := sweep.Run(ctx, d, 30*24*time.Hour)
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
}

// TestJanitorBatchesAreBounded: the janitor deletes expired jobs, their
// output and old events in transactions of at most db.BatchStatements
// statements, each deleting a bounded number of rows (a slice of chunks
// or events with a LIMIT, or one job by id), whatever the machine's speed:
// the statements of each transaction are counted from a trace, not timed.
// Jobs with many chunks are among them, so that one job's output is
// spread over several transactions. It expires 500 jobs, 2,000 with the
// long sizes. Not parallel: the trace is the process's, and the other
// test's statements would interleave with this one's transactions.
func TestJanitorBatchesAreBounded(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	old := time.Now().Add(-60 * 24 * time.Hour) // past the events' retention too
	n := testlong.Pick(500, 2000)
	if err := dbtest.Fill(ctx, d, dbtest.History{Scope: "s", Jobs: n, ChunkBytes: 10 << 10, TTL: time.Millisecond, End: old}); err != nil {
		t.Fatal(err)
	}
	// Three of them with 1,000 more chunks each, 3,000 with the long sizes.
	more := testlong.Pick(1000, 3000)
	if _, err := d.ExecContext(ctx, `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
		INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		SELECT j.id, k.i, 'stdout', k.i * 1000000, k.i, 1, j.ended_at, zeroblob(100)
		FROM (SELECT id, ended_at FROM jobs ORDER BY rowid LIMIT 3) j, k`, more); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var trace []string
	stop := db.TraceQueries(func(q string) {
		mu.Lock()
		trace = append(trace, strings.Join(strings.Fields(q), " "))
		mu.Unlock()
	})
	res, err := sweep.Run(ctx, d, 30*24*time.Hour)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != n || res.EventsDeleted != int64(3*n) {
		t.Fatalf("janitor deleted %d jobs and %d events, want %d and %d", res.Deleted, res.EventsDeleted, n, 3*n)
	}
	bounded := regexp.MustCompile(`(LIMIT \?\)?|WHERE id = \? AND ended_at IS NOT NULL)$`)
	txs, deletes, worst := 0, 0, 0
	in, stmts := false, 0
	for _, q := range trace {
		switch {
		case q == "BEGIN":
			in, stmts = true, 0
		case q == "COMMIT" || q == "ROLLBACK":
			if in && stmts > 0 {
				txs++
				worst = max(worst, stmts)
			}
			in = false
		case in && strings.HasPrefix(q, "DELETE"):
			stmts++
			deletes++
			if !bounded.MatchString(q) {
				t.Errorf("a delete without a bound on its rows: %s", q)
			}
		}
	}
	t.Logf("%d deletes in %d transactions, at most %d in one", deletes, txs, worst)
	if worst > db.BatchStatements {
		t.Errorf("a transaction of the janitor ran %d deletes, want at most %d", worst, db.BatchStatements)
	}
	if txs < 2 {
		t.Errorf("the janitor deleted %d jobs in %d transactions: the trace missed them", n, txs)
	}
}
