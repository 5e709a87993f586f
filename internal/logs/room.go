package logs

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/parse"
)

// ErrDiskFull is why output is dropped when the database's file system is
// (nearly) full.
var ErrDiskFull = errors.New("disk full")

// Room on the disk.
//
// SQLite refuses every write once the WAL cannot grow: on a full disk the
// few bytes of a job's final status would not fit either, and the job
// would stay running until space came back. A WAL whose frames are all
// committed cannot start over before they are copied into the database
// file, which needs room too. So the flusher does not write a batch that
// could take the free space below MinFree, and no checkpoint copies while
// less than twice that (plus the WAL) is free: output is dropped and counted
// instead, and the room is left for status changes and events.

// freeBytes returns the space available on the file system of path.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// checkRoom returns an error wrapping ErrDiskFull when writing n bytes of
// output (and the pages around them) would leave less than MinFree.
func (a *Appender) checkRoom(n int64) error {
	free, ok := freeBytes(a.d.Path)
	if !ok {
		return nil // cannot tell: let SQLite find out
	}
	if need := n + n/4 + a.o.MinFree; free < need {
		return fmt.Errorf("%w: %s free on the database's file system, %s kept for status changes",
			ErrDiskFull, parse.FormatSize(free), parse.FormatSize(a.o.MinFree))
	}
	return nil
}

// roomToCheckpoint reports whether a checkpoint, which may grow the
// database file by as much as the WAL holds, leaves enough room.
func (a *Appender) roomToCheckpoint() bool {
	free, ok := freeBytes(a.d.Path)
	return !ok || free >= 2*a.o.MinFree+a.walFrames.Load()*4096
}
