package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentjobs/jobs/migrations"
)

// BusyTimeout is how long a statement waits for another writer's lock before
// it fails with "database is locked".
const BusyTimeout = 10 * time.Second

// ErrTooNew is returned by Open when the database was migrated by a newer
// version of jobs than this binary knows.
var ErrTooNew = errors.New("database schema is newer than this version of jobs")

// DB is an open jobs database.
type DB struct {
	*sqlx.DB
	Path string

	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// DSN returns the connection string for path. Every pooled connection runs
// with WAL, foreign keys and the busy timeout, and write transactions begin
// IMMEDIATE: a deferred transaction that reads and then writes would fail at
// once with "database is locked" whatever the busy timeout.
//
// Databases keep SQLite's default 4 KiB pages. A page_size(65536) pragma
// that used to be here never took effect: the driver runs _pragma values
// in lexical order, so journal_mode(WAL) came first and fixed the page size.
// Larger pages are not a free win either: every small write transaction
// (create a job, a status change, an event) writes each page it touches to
// the WAL whole, and creating a job, marking it running and then done
// measured 8.1 ms a job with 64 KiB pages against 1.8-4.0 ms with 4 KiB
// pages (same machine, 300 jobs each).
func DSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens the database at path, creating it (mode 0600, in a directory
// created 0700) when it does not exist, and applies pending migrations.
//
// Its connections do not checkpoint the WAL on their own (SQLite's
// wal_autocheckpoint is off): the output appender of a supervisor copies
// the WAL beside its writes and only while the disk has room for it
// (logs.Appender). A connection checkpointing after its commit could fill
// a nearly full disk with the copy, after which SQLite refuses every write,
// a job's end included. The last connection to close still checkpoints.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	st, err := os.Stat(abs)
	fresh := err != nil || st.Size() == 0
	if err := prepareFile(abs); err != nil {
		return nil, err
	}
	if fresh {
		if err := initFile(ctx, abs); err != nil {
			return nil, fmt.Errorf("open database %s: %w", abs, err)
		}
	}
	sqldb := sql.OpenDB(&connector{dsn: DSN(abs) + "&" + url.Values{"_pragma": {"wal_autocheckpoint(0)"}}.Encode()})
	d := &DB{DB: sqlx.NewDb(sqldb, "sqlite"), Path: abs, Now: time.Now}
	if err := d.migrate(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	return d, nil
}

// prepareFile creates the directory (0700) and an empty database file (0600)
// before SQLite sees the path: SQLite would create them with the umask's
// modes, typically 0644. The -wal and -shm files take the main file's mode.
func prepareFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("open database %s: is a directory", path)
	}
	if st.Size() > 0 && st.Size() < 100 {
		return fmt.Errorf("open database %s: not a jobs database (file is too short to be SQLite)", path)
	}
	if st.Size() >= 16 {
		head := make([]byte, 16)
		if _, err := f.ReadAt(head, 0); err == nil && string(head) != "SQLite format 3\x00" {
			return fmt.Errorf("open database %s: not a jobs database (not an SQLite file)", path)
		}
	}
	return nil
}

// initFile gives a new, empty database file incremental auto-vacuum, so
// that the pages of deleted jobs can go back to the file system (the
// janitor's ReleaseFreePages). The mode can be set only before the file's
// first page is written, and setting it on a database that has tables is
// a write transaction: it is done here, once, by a connection of its own,
// which the driver gives the mode before its journal_mode pragma writes the
// first page; never by every connection. On a file another process has
// initialised meanwhile it changes nothing.
func initFile(ctx context.Context, path string) error {
	q := url.Values{}
	q.Add("_auto_vacuum", "INCREMENTAL")
	q.Add("_busy_timeout", strconv.FormatInt(BusyTimeout.Milliseconds(), 10))
	sqldb, err := sql.Open("sqlite", DSN(path)+"&"+q.Encode())
	if err != nil {
		return err
	}
	defer sqldb.Close()
	if err := sqldb.PingContext(ctx); err != nil {
		return fmt.Errorf("initialise: %w", cleanSQLiteError(err))
	}
	return nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// migrate applies every pending migration through a goose Provider and
// refuses a database whose schema is newer than the embedded migrations.
//
// Several processes may open a new database at the same moment (two agents
// running their first `jobs start`). Each migration runs in its own
// immediate transaction, so one of them applies it and the others fail on
// objects that now exist; a failed Up is therefore retried while the schema
// version moves, and succeeds once another process has finished the work.
func (d *DB) migrate(ctx context.Context) error {
	// Every CLI call opens the database, and building a goose Provider
	// parses every migration: first ask the version table, which is one
	// query, whether there is anything to do.
	if latest, ok := embeddedLatest(); ok {
		if v, err := d.SchemaVersion(ctx); err == nil && v == latest {
			return nil
		}
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, d.DB.DB, migrations.FS)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	srcs := p.ListSources()
	latest := srcs[len(srcs)-1].Version
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", cleanSQLiteError(err))
	}
	for attempt := 0; ; attempt++ {
		if current > latest {
			return fmt.Errorf("%w (schema %d, this binary knows %d): upgrade jobs", ErrTooNew, current, latest)
		}
		if current == latest {
			return nil
		}
		_, upErr := p.Up(ctx)
		if upErr == nil {
			return nil
		}
		before := current
		current, err = p.GetDBVersion(ctx)
		if err != nil || current == before || attempt == 3 {
			return fmt.Errorf("migrate: %w", cleanSQLiteError(upErr))
		}
	}
}

// embeddedLatest returns the highest version among the embedded migration
// files, read from their names (NNNNN_description.sql).
func embeddedLatest() (int64, bool) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return 0, false
	}
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, false
		}
		latest = max(latest, v)
	}
	return latest, latest > 0
}

// SchemaVersion reports the newest migration applied to the database.
func (d *DB) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := d.GetContext(ctx, &v, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`)
	return v, err
}

// cleanSQLiteError turns driver errors that users meet into plain words.
func cleanSQLiteError(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return errors.New("not a jobs database (not an SQLite file)")
		case sqlite3.SQLITE_CORRUPT:
			return errors.New("database file is corrupt (run PRAGMA integrity_check in sqlite3)")
		}
	}
	if strings.Contains(err.Error(), "file is not a database") {
		return errors.New("not a jobs database (not an SQLite file)")
	}
	return err
}

// TimeFormat is how every timestamp is stored: ISO-8601 UTC with
// milliseconds, which sorts as text and reads well in the sqlite3 shell.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime renders t for storage. It drops the monotonic clock reading and
// the location, which the driver's default formatting would keep.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime reads a stored timestamp.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// FreeSlack is how many free pages (1 MiB) the janitor leaves in the file
// for new rows to reuse; ReleaseFreePages gives back the rest.
const FreeSlack = 256

// releaseStep bounds the pages one incremental_vacuum statement moves:
// each is its own write transaction, short enough for other writers.
const releaseStep = 128

// ReleaseFreePages gives the free pages beyond a small slack back to the
// file system, a few at a time. It does nothing on a database without
// incremental auto-vacuum (one created before it was the default; see
// Vacuum). It returns how many pages it released.
func (d *DB) ReleaseFreePages(ctx context.Context) (int64, error) {
	var mode int
	if err := d.GetContext(ctx, &mode, `PRAGMA auto_vacuum`); err != nil {
		return 0, fmt.Errorf("release free pages: %w", err)
	}
	if mode != 2 {
		return 0, nil
	}
	var released int64
	for {
		var free int64
		if err := d.GetContext(ctx, &free, `PRAGMA freelist_count`); err != nil {
			return released, fmt.Errorf("release free pages: %w", err)
		}
		if free <= FreeSlack {
			return released, nil
		}
		n := min(free-FreeSlack, releaseStep)
		if _, err := d.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n)); err != nil {
			return released, fmt.Errorf("release free pages: %w", err)
		}
		released += n
		if err := rest(ctx); err != nil {
			return released, fmt.Errorf("release free pages: %w", err)
		}
	}
}

// Vacuum rewrites the database compactly and turns on incremental
// auto-vacuum, which a database created by an older version lacks, then
// truncates the WAL. It holds the write lock for the whole rewrite, which
// takes time in proportion to the database's size, and needs free disk
// space about the size of the database.
func (d *DB) Vacuum(ctx context.Context) error {
	conn, err := d.Conn(ctx)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	defer conn.Close()
	for _, stmt := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("vacuum: %w", cleanSQLiteError(err))
		}
	}
	return nil
}

// Size is the database's size on disk: the file and its WAL.
func (d *DB) Size() int64 {
	var n int64
	for _, p := range []string{d.Path, d.Path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}
