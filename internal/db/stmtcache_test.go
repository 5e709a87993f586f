package db

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// cacheConn opens a one-connection pool over the caching connector and
// returns it with a function that reports the cache's size.
func cacheConn(t *testing.T) (*sql.DB, func() int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cache.db")
	if _, err := prepareFile(path); err != nil {
		t.Fatal(err)
	}
	d := sql.OpenDB(&connector{dsn: DSN(path)})
	d.SetMaxOpenConns(1)
	t.Cleanup(func() { d.Close() })
	size := func() int {
		conn, err := d.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		n := -1
		conn.Raw(func(dc any) error {
			c := dc.(*cachingConn)
			c.mu.Lock()
			n = len(c.stmts)
			c.mu.Unlock()
			return nil
		})
		return n
	}
	return d, size
}

func TestStmtCacheReusesStatements(t *testing.T) {
	ctx := context.Background()
	d, size := cacheConn(t)
	if _, err := d.ExecContext(ctx, `CREATE TABLE t (a INTEGER, b TEXT)`); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := d.ExecContext(ctx, `INSERT INTO t VALUES (?, ?)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var last string
	if err := d.QueryRowContext(ctx, `SELECT count(*), max(b) FROM t`).Scan(&n, &last); err != nil {
		t.Fatal(err)
	}
	if n != 10 || last != "v9" {
		t.Errorf("count, max = %d, %q; want 10, v9", n, last)
	}
	// CREATE, INSERT and SELECT: three statements, however often each ran.
	if got := size(); got != 3 {
		t.Errorf("cached statements = %d; want 3", got)
	}
}

func TestStmtCacheNestedSameQuery(t *testing.T) {
	ctx := context.Background()
	d, _ := cacheConn(t)
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE t (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT a FROM t WHERE a >= ? ORDER BY a`
	rows, err := tx.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outer, inner []int
	for rows.Next() {
		var a int
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, a)
		// The same text while its cached statement is still being read.
		var b int
		if err := tx.QueryRowContext(ctx, q, a).Scan(&b); err != nil {
			t.Fatal(err)
		}
		inner = append(inner, b)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outer) != "[0 1 2]" || fmt.Sprint(inner) != "[0 1 2]" {
		t.Errorf("outer %v, inner %v; want [0 1 2] twice", outer, inner)
	}
}

func TestStmtCacheBoundedAndSchemaChange(t *testing.T) {
	ctx := context.Background()
	d, size := cacheConn(t)
	if _, err := d.ExecContext(ctx, `CREATE TABLE t (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * stmtCacheSize {
		if _, err := d.ExecContext(ctx, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := size(); got > stmtCacheSize {
		t.Errorf("cached statements = %d; want at most %d", got, stmtCacheSize)
	}
	const q = `SELECT * FROM t LIMIT 1`
	cols := func() int {
		rows, err := d.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		c, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	if n := cols(); n != 1 {
		t.Fatalf("columns = %d; want 1", n)
	}
	// A cached statement compiled before a schema change sees the new schema.
	if _, err := d.ExecContext(ctx, `ALTER TABLE t ADD COLUMN b TEXT`); err != nil {
		t.Fatal(err)
	}
	if n := cols(); n != 2 {
		t.Errorf("columns after ALTER TABLE = %d; want 2", n)
	}
}

func TestStmtCacheReportsErrors(t *testing.T) {
	ctx := context.Background()
	d, size := cacheConn(t)
	if _, err := d.ExecContext(ctx, `SELECT * FROM missing`); err == nil {
		t.Error("query of a missing table succeeded")
	}
	if _, err := d.ExecContext(ctx, `CREATE TABLE t (a INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO t VALUES (?)`
	if _, err := d.ExecContext(ctx, ins, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, ins, 1); err == nil {
		t.Error("duplicate key accepted")
	}
	// The statement that failed is still usable.
	if _, err := d.ExecContext(ctx, ins, 2); err != nil {
		t.Errorf("insert after a failed one: %v", err)
	}
	if got := size(); got != 2 {
		t.Errorf("cached statements = %d; want 2 (the failed prepare is not kept)", got)
	}
}
