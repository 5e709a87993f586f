package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Row B22 guards: a database moved away while open keeps everything
// written through the open handle: SQLite's last close does not
// checkpoint a moved file (the -wal at the path may be another's), so
// Close does, into the file it has open. New connections of the old
// handle are refused rather than opened on the file now at the path, and
// the new database's -wal and -shm are left alone.
func TestB22MovedDatabaseKeepsItsWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path, moved := filepath.Join(dir, "jobs.db"), filepath.Join(dir, "moved.db")
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `CREATE TABLE probe (x); INSERT INTO probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := old.CheckFile(); !errors.Is(err, vocab.ErrReplaced) {
		t.Fatalf("CheckFile after the move: %v, want vocab.ErrReplaced", err)
	}
	cur, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := cur.ExecContext(ctx, `CREATE TABLE kept (x); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	// Written after the move, through a connection the old pool had.
	if _, err := old.ExecContext(ctx, `INSERT INTO probe VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	// A connection the old pool opens now would open the new file.
	held, err := old.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Conn(ctx); !errors.Is(err, vocab.ErrReplaced) {
		t.Errorf("a new connection after the move: %v, want vocab.ErrReplaced", err)
	}
	held.Close()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := Open(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var n int
	if err := m.GetContext(ctx, &n, `SELECT count(*) FROM probe`); err != nil || n != 2 {
		t.Errorf("the moved database holds %d of 2 rows (%v)", n, err)
	}
	var x int
	if err := cur.GetContext(ctx, &x, `SELECT x FROM kept`); err != nil || x != 42 {
		t.Errorf("the new database's row: %d, %v", x, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err != nil {
			t.Errorf("the new database's %s: %v", suffix, err)
		}
	}
	t.Logf("MATRIX-FIGURE moved database holds %d of 2 rows written through the old handle; new connections refused; the new database intact", n)
}

// Row B12 guards: damage met by any statement after open is a
// *vocab.CorruptError naming the file, and CheckIntegrity finds damage that no
// statement has met yet.
func TestB12CorruptErrorFromAnyStatement(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, `CREATE TABLE big (x BLOB); INSERT INTO big SELECT randomblob(3000) FROM generate_series(1, 200)`); err != nil {
		// generate_series may be missing: fall back to a recursive CTE.
		if _, err := d.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS big (x BLOB); WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 200) INSERT INTO big SELECT randomblob(3000) FROM s`); err != nil {
			t.Fatal(err)
		}
	}
	var root int64
	if err := d.GetContext(ctx, &root, `SELECT rootpage FROM sqlite_schema WHERE name = 'big'`); err != nil {
		t.Fatal(err)
	}
	d.Close()

	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096-8)
	for i := range junk {
		junk[i] = byte(i*7 + 1)
	}
	if _, err := f.WriteAt(junk, (root-1)*4096+8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	d, err = Open(ctx, path) // the schema is intact: open succeeds
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var ce *vocab.CorruptError
	if err := d.CheckIntegrity(ctx); !errors.As(err, &ce) || ce.Path != path {
		t.Errorf("CheckIntegrity: %v, want a vocab.CorruptError naming %s", err, path)
	}
	var n int
	err = d.GetContext(ctx, &n, `SELECT count(*) FROM big WHERE length(x) > 0`)
	if !errors.As(err, &ce) || !errors.Is(err, vocab.ErrCorrupt) || ce.Path != path {
		t.Errorf("a query over the damaged page: %v, want a vocab.CorruptError naming %s", err, path)
	}
}

// Row B22 guards: a database created where one was removed does not take
// the removed one's -wal and -shm (still open in the process that wrote
// them): SQLite would read the removed database's pages from that WAL.
func TestB22NewDatabaseIgnoresTheRemovedOnesWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.ExecContext(ctx, `CREATE TABLE probe (x); INSERT INTO probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	cur, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the new database: %v", err)
	}
	defer cur.Close()
	var n int
	if err := cur.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_schema WHERE name = 'probe'`); err != nil || n != 0 {
		t.Errorf("the new database sees the removed one's table: %d, %v", n, err)
	}
	var res string
	if err := cur.GetContext(ctx, &res, `PRAGMA integrity_check`); err != nil || res != "ok" {
		t.Errorf("integrity_check of the new database: %q, %v", res, err)
	}
	// The old handle still writes to its own (unlinked) files.
	if _, err := old.ExecContext(ctx, `INSERT INTO probe VALUES (2)`); err != nil {
		t.Errorf("the old handle: %v", err)
	}
	t.Logf("MATRIX-FIGURE a database created over a removed one starts empty and sound while the removed one is still written")
}
