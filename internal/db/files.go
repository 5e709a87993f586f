package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentjobs/jobs/internal/privfile"
	"github.com/agentjobs/jobs/internal/vocab"
)

// The files of a database: the main file and the two SQLite keeps beside
// it in WAL mode, which take the main file's mode when SQLite creates them.
var sideSuffixes = []string{"-wal", "-shm"}

// prepareFile makes the database file safe to hand to SQLite and returns
// what it is (for CheckFile).
//
// Modes: a missing directory is created 0700 and a missing database 0600,
// with their final modes (never created wider and narrowed after). jobs'
// own state directory ($XDG_STATE_HOME/jobs, else ~/.local/state/jobs) is
// tightened to 0700 when it is ours; a directory named with --db or
// JOBS_DB is the user's and left as it is. The database and its -wal and
// -shm, when they exist and are ours, lose every group and other
// permission; one owned by another user is refused. Symlinks are never
// followed to change a mode: a database reached through one must already
// be private.
//
// A -wal or -shm without its database belongs to a database that was
// removed or moved away, possibly still open in another process. SQLite
// would pair a new database with them (and replay that WAL into it), so
// they are removed before the new file is created.
func prepareFile(path string) (os.FileInfo, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	if dir == stateDir() {
		if err := tightenDir(dir); err != nil {
			return nil, err
		}
	}
	if err := checkStatusMark(path); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createFile(path); err != nil {
			return nil, err
		}
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(path); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
		}
		if err := checkPrivate(path, fi, "a symlink to a file"); err != nil {
			return nil, err
		}
	} else {
		if err := tightenFile(path, fi); err != nil {
			return nil, err
		}
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open database %s: is a directory", path)
	}
	for _, suffix := range sideSuffixes {
		side := path + suffix
		sfi, err := os.Lstat(side)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
		}
		if sfi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("open database %s: %s is a symlink: refusing it", path, side)
		}
		if err := tightenFile(side, sfi); err != nil {
			return nil, err
		}
	}
	if err := unlessInUse(path, func() error { return checkHeader(path, fi.Size()) }); err != nil {
		return nil, err
	}
	return fi, nil
}

// createFile creates an empty database file 0600, after removing the -wal
// and -shm of a database that was there before (see prepareFile). The
// directory's flock keeps two processes creating the database at once
// from removing the -wal the other's SQLite has just made.
func createFile(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("open database directory: %w", err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock database directory: %w", err)
	}
	defer syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
	if _, err := os.Lstat(path); err == nil {
		return nil // another process created it meanwhile
	}
	for _, suffix := range sideSuffixes {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s of a removed database: %w", suffix, err)
		}
	}
	f, err := privfile.Open("database file", path, os.O_RDONLY|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return f.Close()
}

// CheckStatusMark refuses, as Open does, a status mark beside the
// database that is not a regular file of ours: a supervisor checks before
// each start, since the job's first status change would touch it.
func (d *DB) CheckStatusMark() error {
	if d.Path == "" || d.Path == ":memory:" {
		return nil
	}
	return checkStatusMark(d.Path)
}

// statusMarkWhat names the status mark in errors.
const statusMarkWhat = "status mark"

// checkStatusMark refuses a status mark (StatusMarkSuffix) that is not a
// regular file of ours, and takes group and other permissions away from
// one that is: jobs writes it beside the database, and a symlink planted
// there by another user (in a directory they can write) would have it
// create or touch a file wherever the symlink points.
func checkStatusMark(path string) error {
	f, err := privfile.Open(statusMarkWhat, path+StatusMarkSuffix, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	return f.Close()
}

// stateDir is jobs' own directory for the default database, which it may
// make private; "" when there is no home directory.
func stateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		if abs, err := filepath.Abs(filepath.Join(d, "jobs")); err == nil {
			return abs
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "state", "jobs")
}

// tightenDir makes jobs' state directory 0700, or refuses it when it is
// another user's (who could swap the database under us). A symlink there
// is left alone: its target is not ours to change.
func tightenDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check database directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return nil
	}
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("database directory %s is owned by uid %d, not by us (uid %d): refusing it", dir, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make database directory private: %w", err)
		}
	}
	return nil
}

// tightenFile takes group and other permissions away from a database file
// of ours (the main file, -wal or -shm), or refuses another user's.
func tightenFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return nil // a directory is reported by the caller
	}
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("database file %s is owned by uid %d, not by us (uid %d): refusing it", path, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, fi.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("make database file private: %w", err)
		}
	}
	return nil
}

// checkPrivate refuses a file reached through a symlink unless it is ours
// and private already.
func checkPrivate(path string, fi os.FileInfo, what string) error {
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("database %s is %s owned by uid %d, not by us (uid %d): refusing it", path, what, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("database %s is %s that others can read (mode %04o): run chmod 600 on it", path, what, fi.Mode().Perm())
	}
	return nil
}

func owner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// checkHeader refuses, as corrupt, a file that cannot be an SQLite
// database: SQLite would otherwise answer "file is not a database" only
// at the first statement. An empty file is a new database.
func checkHeader(path string, size int64) error {
	if size == 0 {
		return nil
	}
	if size < 100 {
		return &vocab.CorruptError{Path: path, Cause: fmt.Sprintf("file is %d bytes, too short to be SQLite", size)}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	head := make([]byte, 16)
	if _, err := f.ReadAt(head, 0); err == nil && string(head) != "SQLite format 3\x00" {
		return &vocab.CorruptError{Path: path, Cause: "not an SQLite file"}
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
