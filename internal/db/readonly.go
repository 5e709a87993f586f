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
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/jmoiron/sqlx"
)

// OpenReadOnly opens the database at path for reading only: SQLite's
// mode=ro, so that no statement can change the file, whoever runs it. It
// is how an audit opens a database it must not change: a replica restored
// from backup, another host's copy, a file on read-only media.
//
// It creates nothing, tightens no mode and runs no migration. It passes
// the checks Open makes before SQLite sees the file (a symlink to a file
// others can read, another user's file, a file that is not SQLite) and
// refuses a schema other than the one this binary writes: a newer one
// (vocab.ErrTooNew), or an older one, which only a read-write Open would bring
// up to date.
//
// A database in WAL mode needs its -shm to be read: SQLite creates one
// when the directory allows it and otherwise reads the -shm that is
// there. When neither is possible (read-only media) and there is no WAL
// to read, the file is opened immutable=1: nothing can change a file
// nobody can write, so SQLite may skip locking.
func OpenReadOnly(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	d, err := openReadOnly(abs)
	if err != nil {
		return nil, err
	}
	if err := d.checkSchema(ctx); err != nil {
		d.DB.Close()
		return nil, err
	}
	return d, nil
}

// openReadOnly is OpenReadOnly without the check of the schema.
func openReadOnly(abs string) (*DB, error) {
	fi, err := checkFileReadOnly(abs)
	if err != nil {
		return nil, err
	}
	if err := unlessInUse(abs, func() error { return checkLostWAL(abs) }); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("mode", "ro")
	if immutable(abs) {
		q.Add("immutable", "1")
	}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	sqldb := sql.OpenDB(&connector{dsn: dsn, path: abs, file: fi})
	return &DB{DB: sqlx.NewDb(sqldb, "sqlite"), Path: abs, Now: time.Now, file: fi, readOnly: true}, nil
}

// ReadOnly reports whether d was opened with OpenReadOnly.
func (d *DB) ReadOnly() bool { return d.readOnly }

// CanWrite reports whether this process could write the database at path
// and the files SQLite keeps beside it. A read that finds it cannot opens
// the file with OpenReadOnly instead of failing.
func CanWrite(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return true // Open creates it, or says why it cannot
	}
	return checkWritable(abs) == nil
}

// checkFileReadOnly is prepareFile for a read: the same refusals, and
// nothing created or changed.
func checkFileReadOnly(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open database %s: is a directory", path)
	}
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		if err := checkPrivate(path, fi, "a symlink to a file"); err != nil {
			return nil, err
		}
	} else if uid, ok := owner(fi); ok && uid != os.Geteuid() && os.Geteuid() != 0 {
		return nil, fmt.Errorf("database file %s is owned by uid %d, not by us (uid %d): refusing it", path, uid, os.Geteuid())
	}
	for _, suffix := range []string{"-wal", "-shm", StatusMarkSuffix} {
		if sfi, err := os.Lstat(path + suffix); err == nil && sfi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("open database %s: %s is a symlink: refusing it", path, path+suffix)
		}
	}
	if err := unlessInUse(path, func() error { return checkHeader(path, fi.Size()) }); err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return nil, fmt.Errorf("open database %s: empty file, no jobs database", path)
	}
	return fi, nil
}

// immutable reports whether SQLite may treat the file as one that cannot
// change: neither it nor its directory can be written (so no -shm can be
// created and no writer can exist) and no WAL holds pages to read.
func immutable(path string) bool {
	if syscall.Access(path, accessW) == nil || syscall.Access(filepath.Dir(path), accessW) == nil {
		return false
	}
	if _, err := os.Stat(path + "-shm"); err == nil {
		return false // SQLite reads the WAL index there
	}
	fi, err := os.Stat(path + "-wal")
	return errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0)
}

// checkSchema refuses a database whose schema is not the one this binary
// writes: the queries are written for it, and bringing it there would be a
// write. A file of another program's is refused as such.
func (d *DB) checkSchema(ctx context.Context) error {
	latest, ok := embeddedLatest()
	if !ok {
		return errors.New("read embedded migrations: none found")
	}
	s, err := d.readSchema(ctx)
	if err != nil {
		return err
	}
	switch {
	case !s.jobs:
		return notJobs(d.Path, s)
	case s.version > latest:
		return fmt.Errorf("%w (schema %d, this binary knows %d): upgrade jobs", vocab.ErrTooNew, s.version, latest)
	case s.version < latest:
		return tooOld(d.Path, s.version, latest)
	}
	return nil
}

// Hosts returns the host each supervisor that wrote the database ran on,
// by supervisor id, and the host of the newest one: the host of jobs and
// events that no longer name their supervisor.
func (d *DB) Hosts(ctx context.Context) (map[string]string, string, error) {
	var rows []struct {
		ID   string `db:"id"`
		Host string `db:"host"`
	}
	if err := d.SelectContext(ctx, &rows, hostsQuery); err != nil {
		return nil, "", fmt.Errorf("read supervisor hosts: %w", err)
	}
	m := make(map[string]string, len(rows))
	newest := ""
	for _, r := range rows {
		m[r.ID] = r.Host
		newest = r.Host
	}
	return m, newest, nil
}

const hostsQuery = `SELECT id, host FROM supervisors ORDER BY started_at, id`

// foreign reports whether every supervisor that wrote the database ran
// on a host other than this one: another host's database, or a copy of
// it. A database no supervisor wrote yet is not foreign.
func (d *DB) foreign(ctx context.Context) (bool, error) {
	host, err := os.Hostname()
	if err != nil {
		return false, fmt.Errorf("read host name: %w", err)
	}
	// A file without the supervisors table (one that jobs has not set up
	// yet, or an older empty database) was written by no supervisor.
	var tables int
	if err := d.QueryRowxContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'supervisors'`).Scan(&tables); err != nil {
		return false, fmt.Errorf("read the schema: %w", asCorrupt(d.Path, err))
	}
	if tables == 0 {
		return false, nil
	}
	var all, ours int
	err = d.QueryRowxContext(ctx, foreignQuery, host).Scan(&all, &ours)
	if err != nil {
		return false, fmt.Errorf("read supervisor hosts: %w", asCorrupt(d.Path, err))
	}
	return all > 0 && ours == 0, nil
}

const foreignQuery = `SELECT count(*), coalesce(sum(host = ? OR host = ''), 0) FROM supervisors`
