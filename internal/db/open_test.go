package db

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/migrations"
)

// migrationVersions returns the versions of the migrations, in order
// (their numbers need not be consecutive).
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int64
	for _, e := range entries {
		if num, _, ok := strings.Cut(e.Name(), "_"); ok && strings.HasSuffix(e.Name(), ".sql") {
			v, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("migration %s: %v", e.Name(), err)
			}
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

// TestOpenMigratesFromEveryVersion builds a database at every earlier schema
// version (0 is a goose table with only its zero row, as goose leaves an
// empty database) and checks that Open brings it to the newest.
func TestOpenMigratesFromEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vs := migrationVersions(t)
	latest := vs[len(vs)-1]
	for _, v := range append([]int64{0}, vs[:len(vs)-1]...) {
		path := filepath.Join(t.TempDir(), "jobs.db")
		raw, err := sql.Open("sqlite", DSN(path))
		if err != nil {
			t.Fatal(err)
		}
		p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS)
		if err != nil {
			t.Fatal(err)
		}
		if v == 0 {
			_, err = p.GetDBVersion(ctx) // creates the version table at 0
		} else {
			_, err = p.UpTo(ctx, v)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.GetDBVersion(ctx); err != nil || got != v {
			t.Fatalf("prepared version = %d, %v; want %d", got, err, v)
		}
		raw.Close()

		d, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open at version %d: %v", v, err)
		}
		if got, err := d.SchemaVersion(ctx); err != nil || got != latest {
			t.Errorf("from %d: version = %d, %v; want %d", v, got, err, latest)
		}
		create(t, d, "s", "")
		d.Close()
	}
}

func TestOpenEmptyAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	j := create(t, d, "s", "")
	d.Close()

	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.FindJobByID(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"supervisors", "jobs", "chunks", "events", "job_summary", "job_history", "active_jobs", "scope_daily"} {
		var n int
		if err := d.Get(&n, `SELECT count(*) FROM sqlite_schema WHERE name = ?`, name); err != nil || n != 1 {
			t.Errorf("schema object %s: count %d, %v", name, n, err)
		}
	}
}

func TestOpenTooNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)`); err != nil {
		t.Fatal(err)
	}
	d.Close()

	_, err = Open(ctx, path)
	if !errors.Is(err, vocab.ErrTooNew) {
		t.Fatalf("open newer database: err = %v, want vocab.ErrTooNew", err)
	}
	if !strings.Contains(err.Error(), "9999") {
		t.Errorf("error %q does not name the schema version", err)
	}
}

// TestOpenConcurrentFirstUse opens a new database from several handles at
// once, as agents starting their first jobs would, and its output data
// file, on a few new files in turn: every open succeeds, and the output
// data file has its 64 KiB pages and WAL mode.
func TestOpenConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "jobs.db")
		const n = 12
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				d, err := Open(ctx, path)
				if err == nil {
					_, err = d.CreateJob(ctx, NewJob{Scope: "s", Command: "true"}, Limits{})
					if err == nil {
						// As the first flood of each would: the output
						// data file is created by whoever comes first.
						_, err = d.Output(ctx, true)
					}
					d.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, open %d: %v", round, i, err)
			}
		}
		o, err := sql.Open("sqlite", "file:"+OutputPath(path)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var page int
		var mode string
		if err := o.QueryRow(`PRAGMA page_size`).Scan(&page); err != nil {
			t.Fatal(err)
		}
		if err := o.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		o.Close()
		if page != OutputPageSize || mode != "wal" {
			t.Fatalf("round %d: the output data file has %d-byte pages in mode %s, want %d in wal", round, page, mode, OutputPageSize)
		}
	}
}

// TestEveryConnectionHasPragmas holds several pooled connections at once,
// so that each is a distinct SQLite connection, and checks the settings
// that the DSN must apply to every one of them.
func TestEveryConnectionHasPragmas(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	const n = 6
	conns := make([]*sql.Conn, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], errs[i] = d.Conn(ctx)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer conns[i].Close()
	}
	if st := d.Stats(); st.InUse != n {
		t.Fatalf("connections in use = %d, want %d distinct", st.InUse, n)
	}
	for i, c := range conns {
		var mode string
		var fk, busy, sync int
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || fk != 1 || busy != int(BusyTimeout.Milliseconds()) || sync != 1 {
			t.Errorf("conn %d: journal_mode=%s foreign_keys=%d busy_timeout=%d synchronous=%d; want wal 1 %d 1",
				i, mode, fk, busy, sync, BusyTimeout.Milliseconds())
		}
	}
}

// TestWriteTransactionsAreImmediate runs transactions that read and then
// write from many goroutines. Deferred transactions would fail at once with
// "database is locked" when two of them try to upgrade to a write lock;
// immediate ones queue on the busy timeout and all succeed.
func TestWriteTransactionsAreImmediate(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	j := create(t, d, "s", "")
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := d.BeginTxx(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback()
			var c int64
			if err := tx.Get(&c, `SELECT read_cursor FROM jobs WHERE id = ?`, j.ID); err != nil {
				errs <- err
				return
			}
			if _, err := tx.Exec(`UPDATE jobs SET read_cursor = ? WHERE id = ?`, c+1, j.ID); err != nil {
				errs <- err
				return
			}
			errs <- tx.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got, err := d.FindJobByID(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ReadCursor != n {
		t.Errorf("read_cursor = %d after %d read-modify-write transactions", got.ReadCursor, n)
	}
}

// TestFileModes checks the directory and file modes under umask 0, where
// SQLite alone would create world-writable files.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "state", "jobs")
	path := filepath.Join(dir, "jobs.db")
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	create(t, d, "s", "") // a write, so that -wal and -shm exist

	for _, p := range []string{filepath.Dir(dir), dir} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o700 {
			t.Errorf("%s: mode %o, want 700", filepath.Base(p), got)
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(p), got)
		}
	}
}

func TestOpenBadFile(t *testing.T) {
	t.Parallel()
	header := []byte("SQLite format 3\x00")
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1024)
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"text", bytes.Repeat([]byte("this is not a database\n"), 50), "not an SQLite file"},
		{"short", []byte("hello"), "too short to be SQLite"},
		{"sqlite header then garbage", append(append([]byte{}, header...), garbage...), "file is not a database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := Open(context.Background(), path)
			if err == nil {
				d.Close()
				t.Fatal("open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "database corrupt: "+path) || !errors.Is(err, vocab.ErrCorrupt) {
				t.Errorf("error %q: want vocab.ErrCorrupt, \"database corrupt: PATH\" and %q", err, tt.want)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.content) {
				t.Error("the file was changed")
			}
		})
	}
}

func TestOpenBadPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"directory under a file", filepath.Join(file, "sub", "jobs.db"), "create database directory"},
		{"path is a directory", dir, "is a directory"},
		{"empty", "", "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(context.Background(), tt.path)
			if err == nil {
				d.Close()
				t.Fatal("open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestCreateJobWaitsForLockedDatabase holds the write lock from another
// handle for two seconds while CreateJob runs: CreateJob must wait (busy
// timeout), not fail, and the file must stay sound.
func TestCreateJobWaitsForLockedDatabase(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	other, err := Open(ctx, d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `INSERT INTO supervisors (id, pid, kind, lock_path, started_at)
		VALUES ('sup1', 1, 'detached', '/l', '2026-01-01T00:00:00.000Z')`); err != nil {
		t.Fatal(err)
	}

	const hold = 2 * time.Second
	started := make(chan struct{})
	done := make(chan error, 1)
	released := make(chan error, 1)
	var doneEarly bool
	begin := time.Now()
	go func() {
		close(started)
		_, err := d.CreateJob(ctx, NewJob{Scope: "s", Command: "true", SupervisorID: "sup1"}, Limits{})
		done <- err
	}()
	// The holder releases the lock from its own goroutine once CreateJob has
	// been waiting for `hold`; it first checks that CreateJob has not
	// returned, which it cannot legitimately do while the lock is held.
	go func() {
		<-started
		timer := time.NewTimer(hold)
		defer timer.Stop()
		select {
		case err := <-done:
			doneEarly = true
			done <- err
		case <-timer.C:
		}
		_, err := holder.ExecContext(ctx, `COMMIT`)
		released <- err
	}()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if doneEarly {
		t.Fatal("CreateJob returned while another writer held the lock")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CreateJob under a held lock: %v", err)
		}
	case <-time.After(BusyTimeout):
		t.Fatal("CreateJob still blocked after the lock was released")
	}
	if el := time.Since(begin); el > BusyTimeout {
		t.Errorf("CreateJob took %v, more than the busy timeout", el)
	}
	var check string
	if err := d.Get(&check, `PRAGMA integrity_check`); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	jobs, err := d.FindJobs(ctx, Filter{Scope: "s"})
	if err != nil || len(jobs) != 1 || jobs[0].SupervisorID != "sup1" {
		t.Errorf("jobs after the wait: %+v, %v", jobs, err)
	}
}

// TestCreateJobGivesUpWithItsContext: a caller whose context ends while
// another writer holds the lock gets an error, and nothing of the job is
// written.
func TestCreateJobGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	holder, err := d.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = d.CreateJob(ctx, NewJob{Scope: "s", Command: "true"}, Limits{})
	if err == nil {
		t.Fatal("CreateJob succeeded while another writer held the lock")
	}
	if el := time.Since(begin); el >= BusyTimeout {
		t.Errorf("CreateJob gave up after %v, not when its context ended", el)
	}
	if _, err := holder.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.Get(&n, `SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM events)`); err != nil || n != 0 {
		t.Errorf("rows left by the abandoned create: %d, %v", n, err)
	}
}
