package db

import (
	"context"
	"fmt"
	"strings"
)

// DayCount is one row of the scope_daily view: what happened in a scope on
// one UTC day.
type DayCount struct {
	Scope    string `db:"scope"`
	Day      string `db:"day"` // YYYY-MM-DD
	Created  int64  `db:"created"`
	Done     int64  `db:"done"`
	Failed   int64  `db:"failed"`
	Killed   int64  `db:"killed"`
	TimedOut int64  `db:"timed_out"`
	Lost     int64  `db:"lost"`
}

const scopeDailyQuery = `SELECT scope, day, created, done, failed, killed, timed_out, lost
FROM scope_daily WHERE day >= ?`

// ScopeDaily returns the scope_daily rows from day since (YYYY-MM-DD) on,
// of one scope or of all, oldest first.
func (d *DB) ScopeDaily(ctx context.Context, scope string, allScopes bool, since string) ([]DayCount, error) {
	var b strings.Builder
	b.WriteString(scopeDailyQuery)
	args := []any{since}
	if !allScopes {
		b.WriteString(` AND scope = ?`)
		args = append(args, scope)
	}
	b.WriteString(` ORDER BY day, scope`)
	var out []DayCount
	if err := d.SelectContext(ctx, &out, b.String(), args...); err != nil {
		return nil, fmt.Errorf("count jobs per day: %w", cleanSQLiteError(err))
	}
	return out, nil
}
