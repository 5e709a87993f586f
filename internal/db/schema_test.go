package db

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/migrations"
)

// Another program's database is refused by Open, OpenForReads and
// OpenReadOnly alike, and not a byte of it changes.
func TestOpenRefusesAnotherProgramsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`CREATE TABLE users(id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	other.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, open := range map[string]func(context.Context, string) (*DB, error){
		"Open": Open, "OpenForReads": OpenForReads, "OpenReadOnly": OpenReadOnly,
	} {
		d, err := open(ctx, path)
		if err == nil {
			d.Close()
		}
		if !errors.Is(err, vocab.ErrNotJobs) {
			t.Errorf("%s: %v, want ErrNotJobs", name, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the file changed")
	}
}

// OpenForReads sets up a new file but does not migrate an older schema;
// Open does.
func TestOpenForReadsNeverMigrates(t *testing.T) {
	ctx := context.Background()
	fresh := filepath.Join(t.TempDir(), "new.db")
	d, err := OpenForReads(ctx, fresh)
	if err != nil {
		t.Fatalf("a new file: %v", err)
	}
	d.Close()

	path := filepath.Join(t.TempDir(), "old.db")
	sqldb, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, sqldb, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	srcs := p.ListSources()
	older := srcs[len(srcs)-2].Version
	if _, err := p.UpTo(ctx, older); err != nil {
		t.Fatal(err)
	}
	// An older jobs that was used: its supervisor is on record.
	if _, err := sqldb.Exec(`INSERT INTO supervisors (id, pid, kind, lock_path, started_at, ended_at) VALUES ('older', 1, 'detached', '/nonexistent', '2026-01-01T00:00:00.000Z', '2026-01-01T00:01:00.000Z')`); err != nil {
		t.Fatal(err)
	}
	sqldb.Close()
	// A first use that stopped part way (nothing ever recorded) is
	// finished by a read: nothing can be using the older schema.
	half := filepath.Join(t.TempDir(), "half.db")
	hdb, err := sql.Open("sqlite", DSN(half))
	if err != nil {
		t.Fatal(err)
	}
	hp, err := goose.NewProvider(goose.DialectSQLite3, hdb, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hp.UpTo(ctx, older); err != nil {
		t.Fatal(err)
	}
	hdb.Close()
	if d, err := OpenForReads(ctx, half); err != nil {
		t.Fatalf("OpenForReads on a first use stopped at schema %d: %v", older, err)
	} else {
		if v, err := d.SchemaVersion(ctx); err != nil || v != srcs[len(srcs)-1].Version {
			t.Errorf("a first use stopped part way, after a read: schema %d, %v", v, err)
		}
		d.Close()
	}
	if d, err := OpenForReads(ctx, path); !errors.Is(err, vocab.ErrTooOld) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("OpenForReads on schema %d: %v, want ErrTooOld", older, err)
	}
	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, err := d.SchemaVersion(ctx); err != nil || v != srcs[len(srcs)-1].Version {
		t.Errorf("after Open: schema %d, %v", v, err)
	}
}
