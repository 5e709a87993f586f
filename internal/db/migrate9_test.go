package db

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/migrations"
)

// TestQueuedAndPtyOnEveryConnection: migration 9 widens the jobs table's
// CHECK constraints in place (status 'queued', mode 'pty'). Every
// connection already open when it runs, each with the old definition
// parsed and a statement prepared, must accept the new values at once;
// stored output must survive (no copy of the table, no cascade through
// the chunks' foreign key); other values are still refused; and the
// migration goes down again.
func TestQueuedAndPtyOnEveryConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	raw, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatal(err)
	}
	const insertJob = `INSERT INTO jobs (id, scope, command, argv, cwd, mode, status, created_at, last_access_at)
		VALUES (?, 's', 'true', '[]', '/', ?, ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')`
	if _, err := raw.ExecContext(ctx, insertJob, "old", "pipe", "starting"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES ('old', 0, 'stdout', 0, 0, 1, '2026-01-01T00:00:00.000Z', x'6f6b0a')`); err != nil {
		t.Fatal(err)
	}
	var conns []*sql.Conn
	for range 4 {
		c, err := raw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if _, err := conns[0].ExecContext(ctx, insertJob, "early", "pty", "starting"); err == nil {
		t.Fatal("schema 8 took mode pty")
	}
	// The migration runs on a connection of its own while the four stay
	// open.
	mig, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close()
	mp, err := goose.NewProvider(goose.DialectSQLite3, mig, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mp.UpTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		if _, err := c.ExecContext(ctx, insertJob, fmt.Sprint("pty", i), "pty", "starting"); err != nil {
			t.Errorf("connection %d open before the migration: mode pty: %v", i, err)
		}
		if _, err := c.ExecContext(ctx, insertJob, fmt.Sprint("queued", i), "pipe", "queued"); err != nil {
			t.Errorf("connection %d open before the migration: status queued: %v", i, err)
		}
		if _, err := c.ExecContext(ctx, insertJob, fmt.Sprint("bad", i), "screen", "starting"); err == nil {
			t.Errorf("connection %d: mode screen accepted", i)
		}
		if _, err := c.ExecContext(ctx, insertJob, fmt.Sprint("bad", i), "pipe", "waiting"); err == nil {
			t.Errorf("connection %d: status waiting accepted", i)
		}
	}
	var data []byte
	if err := raw.QueryRowContext(ctx, `SELECT data FROM chunks WHERE job_id = 'old'`).Scan(&data); err != nil || string(data) != "ok\n" {
		t.Errorf("output stored before the migration: %q, %v", data, err)
	}
	var check string
	if err := raw.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	// Down: rows using the new values must go first, as for any
	// narrowing; then the old definition is back.
	if _, err := raw.ExecContext(ctx, `DELETE FROM jobs WHERE mode = 'pty' OR status = 'queued'`); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conns[1].ExecContext(ctx, insertJob, "after-down", "pty", "starting"); err == nil {
		t.Error("mode pty accepted after the migration went down")
	}
}
