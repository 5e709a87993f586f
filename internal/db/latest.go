package db

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentjobs/jobs/migrations"
)

// latestVersion is the schema version migrations.Latest stands for, from
// its first line; 0 when it names none.
func latestVersion() int64 {
	first, _, _ := strings.Cut(migrations.Latest, "\n")
	num, ok := strings.CutPrefix(first, "-- version ")
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// createLatest sets a new file up at the schema of migrations.Latest in
// one write transaction, with the version table as goose leaves it (the
// zero row and one row per migration), so that goose applies any later
// migration as usual. It does nothing, and reports false, when the file
// holds any schema object once the write lock is held: another process
// set it up first, or began to with goose, whose own checks then apply.
//
// Applying the migrations one transaction after another, with goose's
// bookkeeping and the tables later ones rebuild, is most of what a first
// command on a new database costs.
func (d *DB) createLatest(ctx context.Context) (bool, error) {
	v := latestVersion()
	if v == 0 {
		return false, nil
	}
	tx, err := d.BeginTxx(ctx, nil) // BEGIN IMMEDIATE (the DSN's _txlock)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_schema`); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, migrations.Latest); err != nil {
		return false, fmt.Errorf("create the schema: %w", err)
	}
	var rows strings.Builder
	rows.WriteString(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1)`)
	for _, mv := range embeddedVersions() {
		if mv <= v {
			fmt.Fprintf(&rows, ", (%d, 1)", mv)
		}
	}
	if _, err := tx.ExecContext(ctx, rows.String()); err != nil {
		return false, fmt.Errorf("record the schema version: %w", err)
	}
	return true, tx.Commit()
}
