package db

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// TestWritersOfOneProcessTakeTurns: many write transactions of one
// process at once, each holding the lock for a while (a slow transaction
// on a loaded machine), together hold it far longer than the busy
// timeout. SQLite's busy wait alone left the unlucky ones waiting past
// it: "database is locked" on a start in row A5. In the process's queue
// every one of them waits its turn and none fails.
func TestWritersOfOneProcessTakeTurns(t *testing.T) {
	busyTimeout = 200 * time.Millisecond
	defer func() { busyTimeout = BusyTimeout }()
	d, _ := openTest(t)
	ctx := context.Background()
	const writers, hold = 16, 50 * time.Millisecond // 800 ms of holds in all
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.inTx(ctx, func(tx *sqlx.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO supervisors (id, pid, kind, lock_path, started_at)
					VALUES (?, 1, 'detached', '/l', '2026-01-01T00:00:00.000Z')`, fmt.Sprint("sup", i)); err != nil {
					return err
				}
				time.Sleep(hold) // the transaction's work, slowed down
				return nil
			})
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Error(err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d writers of one process failed for a lock held by another of them", failed, writers)
	}
	var n int
	if err := d.Get(&n, `SELECT count(*) FROM supervisors`); err != nil || n != writers {
		t.Errorf("%d supervisors stored (%v), want %d", n, err, writers)
	}
}

// TestLockWritesEndsWithItsContext: a writer whose context ends while it
// waits its turn gives up with the context's error.
func TestLockWritesEndsWithItsContext(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	unlock, err := d.LockWrites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "true"}, Limits{}); err == nil {
		t.Fatal("CreateJob wrote while another writer of the process had its turn")
	}
	jobs, err := d.FindJobs(context.Background(), Filter{Scope: "s"})
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs after the refused create: %d, %v", len(jobs), err)
	}
}

// TestWritesOutwaitAnotherProcessPastTheBusyTimeout: another process (a
// connection of its own, outside the queue) holds the write lock for five
// busy timeouts, as other supervisors' floods did on a loaded machine. A
// write of DB's methods tries again and lands once the lock is free,
// instead of failing with "database is locked" after one busy timeout.
func TestWritesOutwaitAnotherProcessPastTheBusyTimeout(t *testing.T) {
	busyTimeout = 100 * time.Millisecond
	defer func() { busyTimeout = BusyTimeout }()
	d, _ := openTest(t)
	ctx := context.Background()
	other, err := sqlx.Open("sqlite", DSN(d.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTxx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(5 * busyTimeout) // the fault: the lock held this long
		tx.Rollback()
	}()
	if _, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "true"}, Limits{}); err != nil {
		t.Fatalf("CreateJob while another process held the lock for 5 busy timeouts: %v", err)
	}
	<-released
}

// TestFirstUseWaitsForAnotherInitialiser: a process that finds a new, empty
// database file initialises it; another process doing the same at once
// (two agents' first jobs) may hold the file's lock for longer than one
// busy timeout while it creates the schema, on a loaded machine with the
// race detector several times over. The opener that finds the lock held
// waits for it, and fails only after a patience far longer than the busy
// timeout. Seen as "initialise: database is locked" in
// TestOpenConcurrentFirstUse beside stress-ng.
func TestFirstUseWaitsForAnotherInitialiser(t *testing.T) {
	busyTimeout = 100 * time.Millisecond
	defer func() { busyTimeout = BusyTimeout }()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	// The other initialiser: a write transaction on the new file.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE other_init (x)`); err != nil {
		t.Fatal(err)
	}
	// It lets go after ten busy timeouts (rolled back, so that the file
	// holds no table of another program afterwards).
	const hold = 10 * 100 * time.Millisecond
	released := make(chan error, 1)
	go func() {
		time.Sleep(hold) // the other process's work, however long it takes
		_, err := conn.ExecContext(ctx, `ROLLBACK`)
		conn.Close()
		released <- err
	}()
	began := time.Now()
	err = initFile(ctx, path)
	took := time.Since(began)
	if rerr := <-released; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("initialising a new file whose lock another initialiser held for %v failed after %v: %v", hold, took.Round(time.Millisecond), err)
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open after both initialised: %v", err)
	}
	d.Close()
}
