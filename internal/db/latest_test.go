package db

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/migrations"
)

var update = flag.Bool("update", false, "rewrite migrations/latest/schema.sql from the migrations")

// schemaObjects is every schema object of the database at path as SQLite
// stores it, in an order that recreates it (tables, then indexes, views
// and triggers, each in the order they were made), and the versions goose
// recorded.
func schemaObjects(t *testing.T, path string) (objects []string, versions []int64) {
	t.Helper()
	d, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rows, err := d.Query(`SELECT sql FROM sqlite_schema
		WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
		ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = d.Query(`SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	return objects, versions
}

// migratedOneByOne is a new database set up by goose alone, one migration
// after another, as every release before the latest schema file did.
func migratedOneByOne(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "goose.db")
	if err := initFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

// A new file set up from migrations/latest/schema.sql holds exactly what
// the migrations build one by one: every table, index, view and trigger
// with the same SQL, and the same versions on record, so that later
// migrations apply to it as to any other. With -update, the file is
// written from the migrations instead.
func TestLatestSchemaIsTheMigrations(t *testing.T) {
	ctx := context.Background()
	want, wantVersions := schemaObjects(t, migratedOneByOne(t))
	latest, _ := embeddedLatest()
	if *update {
		var b strings.Builder
		fmt.Fprintf(&b, "-- version %d\n", latest)
		b.WriteString("-- Generated from the migrations: go test ./internal/db -run TestLatestSchemaIsTheMigrations -update\n")
		for _, s := range want {
			b.WriteString(s + ";\n")
		}
		if err := os.WriteFile(filepath.Join("..", "..", "migrations", "latest", "schema.sql"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("migrations/latest/schema.sql written; run again without -update")
	}
	if v := latestVersion(); v != latest {
		t.Fatalf("migrations/latest/schema.sql stands for version %d, the migrations reach %d: run this test with -update", v, latest)
	}
	// createLatest on a new file, then once more on the file it set up.
	path := filepath.Join(t.TempDir(), "latest.db")
	if err := initFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	raw, err := sqlx.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	d := &DB{DB: raw, Path: path}
	for i, want := range []bool{true, false} {
		if created, err := d.createLatest(ctx); err != nil || created != want {
			t.Fatalf("createLatest, call %d: %v, %v; want %v", i+1, created, err, want)
		}
	}
	raw.Close()
	got, gotVersions := schemaObjects(t, path)
	if !slices.Equal(got, want) {
		t.Errorf("a new file's schema differs from the migrations' (run this test with -update):\n got %q\nwant %q", got, want)
	}
	if !slices.Equal(gotVersions, wantVersions) {
		t.Errorf("versions on record %v, the migrations leave %v", gotVersions, wantVersions)
	}
	// Open on a new file takes that way, and a file goose set up is
	// left as it is.
	opened := filepath.Join(t.TempDir(), "opened.db")
	for _, p := range []string{opened, migratedOneByOne(t)} {
		d, err := Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if got, gotVersions := schemaObjects(t, p); !slices.Equal(got, want) || !slices.Equal(gotVersions, wantVersions) {
			t.Errorf("after Open, %s: schema or versions differ from the migrations'", filepath.Base(p))
		}
	}
}
