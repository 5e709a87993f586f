// Package migrations holds the database schema as numbered goose SQL files.
// They are embedded in the binary and applied every time a database opens.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
