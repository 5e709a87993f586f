package db

import (
	"context"
	"fmt"
)

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
