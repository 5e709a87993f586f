package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// fileSchema is what a look at a database file found, before anything
// wrote to it.
type fileSchema struct {
	version int64    // newest migration applied; 0 when none
	jobs    bool     // the file holds a jobs schema (possibly older), or nothing yet
	others  []string // a few tables of the file that are not jobs', for a refusal
}

// coreTables are created by the first migration; a file whose migrations
// table says it has any migration applied holds them all.
var coreTables = []string{"jobs", "supervisors", "events", "chunks"}

// readSchema looks at the schema of the file d has open, which must be
// open read-only (OpenReadOnly's connection): a look must not change a
// file that turns out to be another program's. A file with no table at
// all is a new database; one with goose's migrations table and jobs'
// tables, or with the migrations table and nothing applied yet (another
// process is initialising it), is a jobs database; anything else is
// another program's.
func (d *DB) readSchema(ctx context.Context) (fileSchema, error) {
	// One read transaction: the names and the version from one snapshot.
	// Read apart, a first use migrating the file between the two looked
	// like tables of another program (the version past 0, the tables of
	// the older snapshot without jobs').
	tx, err := d.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fileSchema{}, schemaError(d.Path, "read its schema", err)
	}
	defer tx.Rollback()
	var names []string
	err = tx.SelectContext(ctx, &names, `SELECT name FROM sqlite_schema
		WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return fileSchema{}, schemaError(d.Path, "read its schema", err)
	}
	if len(names) == 0 {
		return fileSchema{jobs: true}, nil
	}
	var s fileSchema
	if slices.Contains(names, "goose_db_version") {
		if err = tx.GetContext(ctx, &s.version, schemaVersionQuery); err != nil {
			return fileSchema{}, schemaError(d.Path, "read schema version", err)
		}
		s.jobs = s.version == 0
		if s.version > 0 {
			s.jobs = true
			for _, t := range coreTables {
				s.jobs = s.jobs && slices.Contains(names, t)
			}
		}
	}
	if !s.jobs {
		for _, n := range names {
			if n != "goose_db_version" && !slices.Contains(coreTables, n) && len(s.others) < 3 {
				s.others = append(s.others, textclean.Echo(n))
			}
		}
	}
	return s, nil
}

// schemaError names what failed, or is the *vocab.CorruptError whole
// ("database corrupt: PATH: cause") when SQLite found the file damaged.
func schemaError(path, what string, err error) error {
	var ce *vocab.CorruptError
	if err = asCorrupt(path, err); errors.As(err, &ce) {
		return ce
	}
	return fmt.Errorf("open database %s: %s: %w", path, what, err)
}

// notJobs is the refusal of a file that holds another program's tables.
func notJobs(path string, s fileSchema) error {
	what := "tables"
	if len(s.others) > 0 {
		what = "tables (" + strings.Join(s.others, ", ") + ")"
	}
	return fmt.Errorf("%w: %s holds another program's %s and no jobs schema; jobs sets up only a new or empty file: name one with --db or JOBS_DB", vocab.ErrNotJobs, path, what)
}

// tooOld is the refusal of a read on a database whose schema is older
// than this binary's: bringing it up to date is a write, and a supervisor
// of the older jobs that wrote it may still be running on it.
func tooOld(path string, v, latest int64) error {
	return fmt.Errorf("%w: %s has schema %d, this jobs %d; a read does not upgrade it (an older jobs may still be using it): 'jobs start' or 'jobs supervise' does", vocab.ErrTooOld, path, v, latest)
}
