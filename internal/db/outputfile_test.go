package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// A crash in the middle of a write to the output data file leaves frames
// of the unfinished transaction in its WAL after the committed ones; a
// read-only read and a writer's both find the bytes as committed. The
// crash is a copy of the files taken while a transaction holds pages it
// has already written to the WAL.
func TestReadOfOutputFileAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openTest(t)
	o, err := d.Output(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("output ", 1<<14)
	if _, err := o.ExecContext(ctx, `INSERT INTO chunk_data (id, job_id, data) VALUES (1, 'j', ?)`, []byte(want)); err != nil {
		t.Fatal(err)
	}

	conn, err := o.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A one-page cache makes the transaction write its pages to the WAL
	// before it commits.
	for _, q := range []string{`PRAGMA cache_size = 1`, `BEGIN IMMEDIATE`,
		`UPDATE chunk_data SET data = zeroblob(length(data))`,
		`INSERT INTO chunk_data (id, job_id, data) VALUES (2, 'j', zeroblob(4000000))`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	crashed := filepath.Join(dir, "jobs.db")
	for _, suffix := range []string{"", "-output", "-output-wal"} {
		b, err := os.ReadFile(d.Path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if suffix == "-output-wal" && len(b) < 4000000 {
			t.Fatalf("the transaction left %d bytes in the WAL: no crash to copy", len(b))
		}
		if err := os.WriteFile(crashed+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctx, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ro2, err := ro.Output(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadOutputData(ctx, ro2, 1, nil)
	if err != nil || string(got) != want {
		t.Fatalf("read-only read of the crashed copy: %d bytes, %v; want the %d committed", len(got), err, len(want))
	}

	rw, err := Open(ctx, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	out, err := rw.Output(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err = ReadOutputData(ctx, out, 1, nil)
	if err != nil || string(got) != want {
		t.Fatalf("read after the writer opened it: %d bytes, %v; want the %d committed", len(got), err, len(want))
	}
	var rows int
	if err := sqlx.GetContext(ctx, out, &rows, `SELECT count(*) FROM chunk_data`); err != nil || rows != 1 {
		t.Fatalf("rows after the roll-back: %d, %v; want 1", rows, err)
	}
}

// Bytes leave the output data file only once the database's commits that
// stopped naming them are on the disk (syncWAL): the sweep and
// FreeOutputData sync the database's WAL first, and delete nothing when
// they cannot. A power loss may undo the database's last commits
// (synchronous=NORMAL), and must not bring back chunk rows whose bytes
// are gone. Not parallel: it replaces syncWAL.
func TestOutputBytesGoAfterTheWALIsSynced(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	o, err := d.Output(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= 3; id++ {
		if _, err := o.ExecContext(ctx, `INSERT INTO chunk_data (id, job_id, data) VALUES (?, 'j', x'00')`, id); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int {
		var n int
		if err := sqlx.GetContext(ctx, o, &n, `SELECT count(*) FROM chunk_data`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	conn, err := o.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	real := syncWAL
	defer func() { syncWAL = real }()
	var synced []string
	syncWAL = func(path string) error {
		synced = append(synced, path)
		return errors.New("disk gone")
	}
	if err := d.FreeOutputData(ctx, conn, []int64{1}); err == nil || rows() != 3 {
		t.Fatalf("free with the WAL not synced: %v, %d rows left; want an error and all 3", err, rows())
	}
	if n, err := d.SweepOutputData(ctx); err == nil || n != 0 || rows() != 3 {
		t.Fatalf("sweep with the WAL not synced: %d deleted, %v; want an error and none", n, err)
	}
	if len(synced) != 2 || synced[0] != d.Path {
		t.Fatalf("synced %q, want the database's WAL twice", synced)
	}
	synced = nil
	syncWAL = func(path string) error {
		synced = append(synced, path)
		return real(path)
	}
	if err := d.FreeOutputData(ctx, conn, []int64{1}); err != nil || rows() != 2 {
		t.Fatalf("free: %v, %d rows left; want 2", err, rows())
	}
	if n, err := d.SweepOutputData(ctx); err != nil || n != 2 || rows() != 0 {
		t.Fatalf("sweep of the 2 rows no chunk names: %d deleted, %v", n, err)
	}
	if len(synced) != 2 {
		t.Fatalf("synced the WAL %d times, want once before each delete", len(synced))
	}
}
