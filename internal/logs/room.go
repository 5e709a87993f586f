package logs

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Room on the disk.
//
// SQLite refuses every write once the WAL cannot grow: on a full disk the
// few bytes of a job's final status would not fit either, and the job
// would stay running until space came back. A WAL whose frames are all
// committed cannot start over before they are copied into the database
// file, which needs room too. So the flusher writes a batch only when the
// disk has room for it twice (in the WAL, then in the database file) beside
// the growth the WAL's uncopied pages still owe the file and MinFree
// (roomForWAL), and no checkpoint copies while less than twice MinFree
// (plus the WAL) is free: output is dropped and counted instead, and the
// room is left for status changes and events.
//
// Once the disk is tight (less than twice MinFree plus the WAL free), a
// checkpoint copies only when what it adds to the database file fits (the
// pages of the newest snapshot past the file's end: a full disk's writes
// mostly rewrite pages the file has), and then truncates the WAL, giving
// its space back. Without that, the WAL of a supervisor that once filled
// the disk was never copied again: it grew by every later job's writes
// and ate the room even after space was freed (every job's output
// dropped on 4 MiB, a job's end never recorded on 16 MiB).
//
// The reserve and a job's end. Recording the end of a job whose output
// was dropped (an output_dropped event, then the terminal transition)
// appends at most about 90 KiB to the WAL (TestReserveCoversEveryJobEnd:
// two transactions touching the jobs row, the events table and their
// indexes, ~22 pages of 4 KiB plus frame headers, page splits included).
// Without checkpoints, the 200 jobs a supervisor may run would take 12 MiB
// together, six times the reserve. So on a tight disk the supervisor
// calls [Appender.Reclaim] before it records each end, one end at a time:
// the WAL is truncated first, and the end needs only its own frames, at
// most 90 KiB of the 2 MiB reserve, plus the few pages by which it grows
// the database file (the 200 ends grow it by about 112 KiB in all), which
// the next Reclaim copies: 90 KiB + 112 KiB of 2 MiB. A Reclaim that
// cannot copy (the file cannot grow by what it needs) still leaves the
// reserve for 20 ends.

// freeBytes returns the space available on the file system of path.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// checkRoom returns an error wrapping vocab.ErrDiskFull when writing n bytes of
// output (and the pages around them) would leave less than MinFree.
func (a *Appender) checkRoom(n int64) error {
	free, ok := freeBytes(a.d.Path)
	if !ok {
		return nil // cannot tell: let SQLite find out
	}
	if need := n + n/4 + a.o.MinFree; free < need {
		return fmt.Errorf("%w: %s free on the database's file system, %s kept for status changes",
			vocab.ErrDiskFull, parse.FormatSize(free), parse.FormatSize(a.o.MinFree))
	}
	return nil
}

// roomForWAL is checkRoom for output written to the database: its n bytes
// (and the pages around them) take room twice, in the WAL now and in the
// database file when a checkpoint copies them there, and so do the WAL's
// pages not copied yet. A WAL allowed to take the room its own copy needs
// could never be copied: output stayed dropped after space returned, and
// the WAL kept its space for good. conn is the writer's connection.
func (a *Appender) roomForWAL(ctx context.Context, conn *sql.Conn, n int64) error {
	free, ok := freeBytes(a.d.Path)
	if !ok {
		return nil // cannot tell: let SQLite find out
	}
	grow := n + n/4
	wal := fileSize(a.d.Path + "-wal")
	if free >= 2*grow+wal+a.o.MinFree {
		return nil // even a copy of the whole WAL fits
	}
	if need := 2*grow + a.copyGrowth(ctx, conn, wal) + a.o.MinFree; free < need {
		return fmt.Errorf("%w: %s free on the database's file system, %s needed to store %s of output and copy it into the database, %s kept for status changes",
			vocab.ErrDiskFull, parse.FormatSize(free), parse.FormatSize(need), parse.FormatSize(n), parse.FormatSize(a.o.MinFree))
	}
	return nil
}

// copyGrowth returns by how much copying the WAL would grow the database
// file: the pages of the newest snapshot past the file's end (a
// checkpoint rewrites the others in place). It is at most wal, the WAL's
// size, which is the answer when SQLite cannot be asked.
func (a *Appender) copyGrowth(ctx context.Context, conn *sql.Conn, wal int64) int64 {
	var pages, pageSize int64
	if conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages) != nil ||
		conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize) != nil {
		return wal
	}
	return min(max(pages*pageSize-fileSize(a.d.Path), 0), wal)
}

// tight reports whether the database's file system has less than twice
// MinFree free beside the WAL: a checkpoint may then take the reserve.
func (a *Appender) tight() (free int64, tight bool) {
	free, ok := freeBytes(a.d.Path)
	if !ok {
		return 0, false
	}
	return free, free < 2*a.o.MinFree+fileSize(a.d.Path+"-wal")
}

// checkpointMode returns how to checkpoint on conn: PASSIVE while there is
// room, TRUNCATE on a tight disk when what the copy adds to the database
// file fits, and an error wrapping vocab.ErrDiskFull when it does not.
func (a *Appender) checkpointMode(ctx context.Context, conn *sql.Conn) (string, error) {
	free, tight := a.tight()
	if !tight {
		return "PASSIVE", nil
	}
	var pages, pageSize int64
	if err := conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return "", fmt.Errorf("count pages: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return "", fmt.Errorf("read page size: %w", err)
	}
	if growth := pages*pageSize - fileSize(a.d.Path); free < growth+checkpointMargin {
		return "", fmt.Errorf("%w: %s free, a checkpoint needs %s", vocab.ErrDiskFull, parse.FormatSize(free), parse.FormatSize(growth+checkpointMargin))
	}
	return "TRUNCATE", nil
}

// checkpointMargin is room a tight checkpoint leaves beyond its growth.
const checkpointMargin = 64 << 10

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Reclaim copies the WAL into the database file and truncates it when the
// disk is tight and the copy fits (see above); it does nothing otherwise.
// A supervisor calls it before recording a job's end, so that the end
// finds the whole reserve. It returns whether the disk was tight.
func (a *Appender) Reclaim(ctx context.Context) bool {
	if _, tight := a.tight(); !tight {
		return false
	}
	conn, err := a.d.Conn(ctx)
	if err != nil {
		return true
	}
	defer conn.Close()
	_ = a.checkpoint(ctx, conn) // a failure leaves the reserve as it is
	return true
}
