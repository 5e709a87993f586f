// Package migrations holds the database schema as numbered goose SQL files.
// They are embedded in the binary and applied every time a database opens.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

// Latest is the schema the migrations build, as SQLite stores it, with
// the version it stands for on its first line ("-- version N"): a new
// file is set up from it in one transaction instead of one migration
// after another. It is generated from the migrations (go test
// ./internal/db -run TestLatestSchemaIsTheMigrations -update), and that
// test fails while it differs from what they build.
//
//go:embed latest/schema.sql
var Latest string
