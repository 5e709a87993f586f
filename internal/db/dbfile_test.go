package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Row B22 guards: a process that closes a database whose file was moved
// away leaves the -wal and -shm at the path alone, since they belong to
// the database created there since; SQLite's close would delete them by
// name, and with them the new database's committed rows.
func TestB22CloseLeavesTheNewDatabasesWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `CREATE TABLE probe (x)`); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "moved.db")); err != nil {
		t.Fatal(err)
	}
	if err := old.CheckFile(); !errors.Is(err, ErrReplaced) {
		t.Fatalf("CheckFile after the move: %v, want ErrReplaced", err)
	}
	// A connection the old pool opens now would open the new file.
	old.SetMaxIdleConns(0)
	if _, err := old.ExecContext(ctx, `INSERT INTO probe VALUES (1)`); !errors.Is(err, ErrReplaced) {
		t.Errorf("a new connection after the move: %v, want ErrReplaced", err)
	}

	cur, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	// Keep the new database's rows in its WAL, not yet in its file.
	if _, err := cur.ExecContext(ctx, `CREATE TABLE kept (x); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err != nil {
			t.Errorf("the new database's %s is gone after the old handle closed: %v", suffix, err)
		}
	}
	again, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var x int
	if err := again.GetContext(ctx, &x, `SELECT x FROM kept`); err != nil || x != 42 {
		t.Errorf("the new database's row: %d, %v", x, err)
	}
	t.Logf("MATRIX-FIGURE closing the moved database's handle left the new database's -wal and -shm; its row reads back")
}

// Row B12 guards: damage met by any statement after open is a
// *CorruptError naming the file, and CheckIntegrity finds damage that no
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
	var ce *CorruptError
	if err := d.CheckIntegrity(ctx); !errors.As(err, &ce) || ce.Path != path {
		t.Errorf("CheckIntegrity: %v, want a CorruptError naming %s", err, path)
	}
	var n int
	err = d.GetContext(ctx, &n, `SELECT count(*) FROM big WHERE length(x) > 0`)
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Path != path {
		t.Errorf("a query over the damaged page: %v, want a CorruptError naming %s", err, path)
	}
}
