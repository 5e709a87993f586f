// Package privfile opens the files jobs keeps for itself beside a database
// (the status mark, spool files) and in its runtime directory (locks, the
// supervisors' log, a tmux job's environment), so that none of them can be
// turned against the user running jobs: a directory shared with other
// users may hold a symlink or a file planted at the path beforehand.
//
// Every open goes through Open or CreateTemp: the path is never followed
// through a symlink (O_NOFOLLOW), a file is created with O_EXCL and mode
// 0600, a FIFO or device cannot block or be written (O_NONBLOCK, then a
// regular-file check), and what was opened is checked on the descriptor:
// a regular file owned by this user. A file of ours that others may read
// (an empty mark left 0644 by an older jobs) loses those permissions,
// through the descriptor, never the path.
package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens path with flag (os.O_RDONLY, os.O_WRONLY or os.O_RDWR, with
// os.O_APPEND, os.O_TRUNC and os.O_CREATE as wanted). With os.O_CREATE a
// missing file is created exclusively, mode 0600; an existing one is
// opened as it is. what names the file in errors ("lock file", "status
// mark"); each refusal is one line naming the path. A missing file (without
// os.O_CREATE) gives an error wrapping fs.ErrNotExist.
func Open(what, path string, flag int) (*os.File, error) {
	base := flag&^(os.O_CREATE|os.O_EXCL) | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	var f *os.File
	var err error
	for range 3 {
		if flag&os.O_CREATE != 0 {
			f, err = os.OpenFile(path, base|os.O_CREATE|os.O_EXCL, 0o600)
			if !errors.Is(err, fs.ErrExist) {
				break
			}
		}
		f, err = os.OpenFile(path, base, 0)
		// Removed between the two opens: create it again.
		if !errors.Is(err, fs.ErrNotExist) || flag&os.O_CREATE == 0 {
			break
		}
	}
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil {
			if cerr := Check(what, path, fi); cerr != nil {
				return nil, cerr
			}
		}
		return nil, fmt.Errorf("open %s %s: %w", what, path, unwrap(err))
	}
	if err := own(what, path, f); err != nil {
		f.Close()
		return nil, err
	}
	// A regular file: O_NONBLOCK (against a FIFO) has done its work, and
	// the descriptor may be handed to a child as its stdout.
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s %s: %w", what, path, err)
	}
	return f, nil
}

// CreateTemp creates a new file in dir as os.CreateTemp does (a random
// name, O_EXCL, mode 0600) and checks it like Open.
func CreateTemp(what, dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", what, err)
	}
	if err := own(what, f.Name(), f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// Touch moves path's access and modification times to now, creating the
// file when it is missing: through Open, so a symlink or another user's
// file there is refused and left as it is.
func Touch(what, path string) error {
	f, err := Open(what, path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	defer f.Close()
	now := unix.NsecToTimeval(time.Now().UnixNano())
	if err := unix.Futimes(int(f.Fd()), []unix.Timeval{now, now}); err != nil {
		return fmt.Errorf("touch %s %s: %w", what, path, err)
	}
	return nil
}

// Check refuses, in one line naming what the file is for, anything at
// path but a regular file of ours; fi is what Lstat (or Stat on an open
// descriptor) said of it.
func Check(what, path string, fi os.FileInfo) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s %s is a symlink: refusing it", what, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %s is not a regular file: refusing it", what, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s %s is owned by uid %d, not by us (uid %d): refusing it", what, path, st.Uid, os.Geteuid())
	}
	return nil
}

// own checks the open file and takes group and other permissions away.
func own(what, path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open %s %s: %w", what, path, err)
	}
	if err := Check(what, path, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(fi.Mode().Perm() & 0o700); err != nil {
			return fmt.Errorf("make %s %s private: %w", what, path, err)
		}
	}
	return nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
