package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jmoiron/sqlx"
)

// ErrNoDatabase is returned by OpenReadOnly when no database exists at the
// path.
var ErrNoDatabase = errors.New("no database")

// OpenReadOnly opens an existing database for reading only. Unlike Open it
// creates no file or directory and applies no migration, so a shell's
// completion can ask it for names without leaving anything behind. Queries
// wait at most a second for a lock: completion must answer at once or not
// at all.
func OpenReadOnly(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return nil, fmt.Errorf("open database %s: %w", abs, ErrNoDatabase)
	}
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(1000)")
	q.Add("_pragma", "query_only(1)")
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	sqldb := sql.OpenDB(&connector{dsn: dsn})
	sqldb.SetMaxOpenConns(1)
	return &DB{DB: sqlx.NewDb(sqldb, "sqlite"), Path: abs, Now: time.Now}, nil
}

// Ref is a job's id and name, for completion.
type Ref struct {
	ID   string `db:"id"`
	Name string `db:"name"`
}

const refsQuery = `SELECT id, coalesce(name, '') AS name FROM jobs WHERE scope = ?
ORDER BY created_at DESC, rowid DESC LIMIT ?`

// Refs returns the ids and names of the scope's newest jobs, at most limit.
func (d *DB) Refs(ctx context.Context, scope string, limit int) ([]Ref, error) {
	var out []Ref
	if err := d.SelectContext(ctx, &out, refsQuery, scope, limit); err != nil {
		return nil, fmt.Errorf("find job ids: %w", cleanSQLiteError(err))
	}
	return out, nil
}

const scopesQuery = `SELECT DISTINCT scope FROM jobs ORDER BY scope LIMIT ?`

// Scopes returns the scopes that have jobs, at most limit.
func (d *DB) Scopes(ctx context.Context, limit int) ([]string, error) {
	var out []string
	if err := d.SelectContext(ctx, &out, scopesQuery, limit); err != nil {
		return nil, fmt.Errorf("find scopes: %w", cleanSQLiteError(err))
	}
	return out, nil
}
