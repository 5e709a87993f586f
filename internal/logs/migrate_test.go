package logs

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/migrations"
)

// TestOutputAcrossChunkSizeMigration: a database whose chunks were all
// stored as is (schema 10, before chunks.size) opens with this version;
// the job's output goes on compressed after the old rows, and reads,
// counters and the active_jobs view see one output. Down again, the
// compressed chunks are counted as evicted, so that the older schema names
// the gap instead of reading frames as output.
func TestOutputAcrossChunkSizeMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	raw, err := sql.Open("sqlite", db.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	old := textOutput(100 << 10)
	now := db.FormatTime(time.Now())
	if _, err := raw.ExecContext(ctx, `INSERT INTO jobs (id, scope, command, argv, cwd, status, started_at, created_at, last_access_at, output_bytes, output_lines)
		VALUES ('old', 's', 'make', '[]', '/', 'running', ?1, ?1, ?1, ?2, ?3)`, now, len(old), bytes.Count(old, newline)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES ('old', 0, 'stdout', 0, 0, ?, ?, ?)`, bytes.Count(old, newline), now, old); err != nil {
		t.Fatal(err)
	}

	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) // after the appender's close, registered later
	a := newAppender(t, d, AppenderOptions{})
	track(t, a, "old", 0)
	more := textOutput(1 << 20)
	write(t, a, "old", Stdout, more)
	flush(t, a)
	want := append(bytes.Clone(old), more...)
	cs := readChunks(t, d, "old")
	if len(cs) < 2 || cs[0].Packed || !cs[len(cs)-1].Packed {
		t.Fatalf("%d chunks: the old one should be stored as is, the new ones compressed", len(cs))
	}
	got, gap, _ := readAll(t, d, "old", 300<<10, Filter{})
	if gap != 0 || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (gap %d), want the %d written before and after the migration", len(got), gap, len(want))
	}
	var live int64
	if err := d.QueryRowContext(ctx, `SELECT output_bytes FROM active_jobs WHERE id = 'old'`).Scan(&live); err != nil || live != int64(len(want)) {
		t.Fatalf("active_jobs.output_bytes = %d, %v; want %d", live, err, len(want))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	var packedBytes int64
	if err := d.QueryRowContext(ctx, `SELECT sum(size) FROM chunks WHERE size IS NOT NULL`).Scan(&packedBytes); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	var evicted, left int64
	if err := raw.QueryRowContext(ctx, `SELECT evicted_bytes, (SELECT sum(length(data)) FROM chunks) FROM jobs WHERE id = 'old'`).Scan(&evicted, &left); err != nil {
		t.Fatal(err)
	}
	if evicted != packedBytes || left != int64(len(want))-packedBytes {
		t.Fatalf("after down: evicted %d, %d bytes left; want %d evicted", evicted, left, packedBytes)
	}
}
