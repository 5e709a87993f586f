package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Checkpoints: copying the WAL into the database file.
//
// Connections of a DB do not checkpoint by themselves (see Open). The one
// process that writes much, a supervisor, keeps the WAL in bounds with an
// Upkeep, which its output appender (package logs) calls around every
// transaction it writes on its own connection.
//
// SQLite checkpoints on the commit that takes the WAL past 1000 pages,
// in the committing connection: under a flood, the flusher stopped every
// 4 MiB to copy them (read back from the WAL, written to the database,
// synced), a tenth of its time. Here the writer's connection does not
// checkpoint by itself; after every ckptBytes or ckptCommits committed
// (Upkeep.Committed), the checkpointer goroutine copies the WAL on its own
// connection, on another core, while the writer writes on. A checkpoint
// that runs beside a writer cannot let the WAL start over (that needs every
// frame copied when a write transaction begins), so once a checkpoint finds
// WALRestartFrames in the WAL, or as many pages of output were committed,
// the writer checkpoints itself before its next transaction
// (Upkeep.BeforeTx), copying only what the checkpointer has not: the WAL
// then starts over, and stays under about WALRestartFrames plus a
// checkpointer's round. (BenchmarkAppend256MiB and bench/run.sh's capture
// workload measure the difference against raw SQLite.)
//
// Frames, not bytes of output, measure the WAL: a trickle of many jobs
// writes far more pages than output bytes (each flush rewrites the pages
// of every job row it advances).
const (
	ckptBytes   = 4 << 20
	ckptCommits = 32
)

// WALRestartFrames is how many frames the WAL holds at most before the
// writer starts it over (32 MiB of 4 KiB pages).
const WALRestartFrames = 8192

// Room on the disk.
//
// SQLite refuses every write once the WAL cannot grow: on a full disk the
// few bytes of a job's final status would not fit either, and the job
// would stay running until space came back. A WAL whose frames are all
// committed cannot start over before they are copied into the database
// file, which needs room too. So the writer writes a batch only when the
// disk has room for it twice (in the WAL, then in the database file) beside
// the growth the WAL's uncopied pages still owe the file and MinFree
// (RoomForWAL), and no checkpoint copies while less than twice MinFree
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
// appends at most about 90 KiB to the WAL (logs' TestReserveCoversEveryJobEnd:
// two transactions touching the jobs row, the events table and their
// indexes, ~22 pages of 4 KiB plus frame headers, page splits included).
// Without checkpoints, the 200 jobs a supervisor may run would take 12 MiB
// together, six times the reserve. So on a tight disk the supervisor
// calls [Upkeep.Reclaim] before it records each end, one end at a time:
// the WAL is truncated first, and the end needs only its own frames, at
// most 90 KiB of the 2 MiB reserve, plus the few pages by which it grows
// the database file (the 200 ends grow it by about 112 KiB in all), which
// the next Reclaim copies: 90 KiB + 112 KiB of 2 MiB. A Reclaim that
// cannot copy (the file cannot grow by what it needs) still leaves the
// reserve for 20 ends.

// Upkeep keeps the WAL of d in bounds and the room on its disk for the
// writes that record what happens to jobs: the checkpoints of one writer's
// database, and the checks that its writes leave MinFree. Its methods are
// safe for concurrent use, except BeforeTx, TxFull and Committed, which
// only the one writer calls, one at a time.
type Upkeep struct {
	d       *DB
	minFree int64
	off     bool // checkpoints are left to another process
	// restartFrames is how many frames the WAL holds at most before the
	// writer starts it over: WALRestartFrames, fewer of an output data
	// file's larger pages (NewOutputUpkeep).
	restartFrames int64

	mu            sync.Mutex   // held while a checkpoint runs
	frames        atomic.Int64 // frames in the WAL at the last checkpoint
	restartMisses int          // restarts in a row that readers kept from starting the WAL over; guarded by mu

	// The writer's bookkeeping, used by the writer alone.
	walBytes int64 // committed since the checkpointer was woken
	commits  int   // transactions since the checkpointer was woken
	walSync  int64 // committed since the writer last checkpointed

	wake   chan struct{} // wakes the checkpointer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewUpkeep returns the upkeep of d, which leaves minFree bytes free on its
// file system for status changes and events. With off, checkpoints are left
// to another process (Litestream, which replicates the database from its
// WAL, asks applications to leave them to it): the WAL is never copied into
// the database file here. Start starts its checkpointer.
func (d *DB) NewUpkeep(minFree int64, off bool) *Upkeep {
	u := &Upkeep{d: d, minFree: minFree, off: off, restartFrames: WALRestartFrames, wake: make(chan struct{}, 1)}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	return u
}

// NewOutputUpkeep returns the upkeep of the output data file o, with the
// reserve and checkpoint policy of u: its WAL starts over at the same size
// in bytes (WALRestartFrames pages of 4 KiB), fewer frames of its larger
// pages.
func (u *Upkeep) NewOutputUpkeep(o *DB) *Upkeep {
	ou := o.NewUpkeep(u.minFree, u.off)
	ou.restartFrames = WALRestartFrames * 4096 / OutputPageSize
	return ou
}

// Off reports whether checkpoints are left to another process.
func (u *Upkeep) Off() bool { return u.off }

// Start starts the checkpointer goroutine, which copies the WAL when woken
// (Wake, Committed). Until Start, only the writer's own checkpoints run.
func (u *Upkeep) Start() {
	u.wg.Add(1)
	go u.checkpointer()
}

// Stop stops the checkpointer and waits for it.
func (u *Upkeep) Stop() {
	u.cancel()
	u.wg.Wait()
}

// Wake wakes the checkpointer: a supervisor calls it now and then, so that
// the WAL is copied also when little output comes (status changes and
// events go to the WAL too, and no connection checkpoints by itself; see
// Open).
func (u *Upkeep) Wake() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// SetUpWriter sets up conn, the writer's connection: it checkpoints by
// itself (as SQLite does by default) only when no checkpointer runs and
// checkpoints are not left to another process.
func (u *Upkeep) SetUpWriter(ctx context.Context, conn *sql.Conn, checkpointerRuns bool) error {
	autockpt := "PRAGMA wal_autocheckpoint = 0"
	if !checkpointerRuns && !u.off {
		autockpt = "PRAGMA wal_autocheckpoint = 1000"
	}
	_, err := conn.ExecContext(ctx, autockpt)
	return err
}

// BeforeTx readies the WAL for a transaction of n bytes of output on the
// writer's connection conn. On a tight disk the WAL is copied and
// truncated before every transaction: a WAL left to grow to
// WALRestartFrames, beside the database file holding the same pages,
// filled a small disk twice over (see Room on the disk above). Otherwise it
// starts over once it holds WALRestartFrames. It returns an error wrapping
// vocab.ErrDiskFull when the transaction would not leave room (RoomForWAL).
func (u *Upkeep) BeforeTx(ctx context.Context, conn *sql.Conn, n int64) error {
	_, tight := u.Tight()
	restarted := false
	switch {
	case tight:
		restarted = u.Checkpoint(ctx, conn) == nil
	case u.walSync >= WALRestartFrames*4096 || u.frames.Load() >= u.restartFrames:
		restarted = u.restartWAL(ctx, conn) == nil
	}
	if restarted {
		u.frames.Store(0)
		u.walSync = 0
	}
	if err := u.RoomForWAL(ctx, conn, n); err != nil {
		// Copying the WAL may give room back.
		u.Wake()
		return err
	}
	return nil
}

// TxFull reports whether a transaction that holds n bytes of output should
// end rather than take more more: one that takes the WAL past
// WALRestartFrames ends there, so that the next one starts the WAL over,
// and one whose next batch would not leave room ends too.
func (u *Upkeep) TxFull(ctx context.Context, conn *sql.Conn, n, more int64) bool {
	return u.walSync+n >= WALRestartFrames*4096 || u.RoomForWAL(ctx, conn, n+more) != nil
}

// WALBytes is the output committed to the WAL since the writer last
// checkpointed, as the writer counts it (Committed).
func (u *Upkeep) WALBytes() int64 { return u.walSync }

// Committed counts a committed transaction of n bytes of output and wakes
// the checkpointer after every ckptBytes or ckptCommits.
func (u *Upkeep) Committed(n int64) {
	u.walBytes += n
	u.walSync += n
	u.commits++
	if u.walBytes >= ckptBytes || u.commits >= ckptCommits {
		u.walBytes, u.commits = 0, 0
		u.Wake()
	}
}

// errNoCheckpoints is what a checkpoint returns when they are left to
// another process.
var errNoCheckpoints = errors.New("checkpoints are left to another process")

// checkpointer copies the WAL into the database file when woken.
func (u *Upkeep) checkpointer() {
	defer u.wg.Done()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-u.wake:
		}
		conn, err := u.d.Conn(u.ctx)
		if err != nil {
			continue // the writer's own checkpoints still bound the WAL
		}
		_ = u.Checkpoint(u.ctx, conn) // a failed one is made up for by the writer's
		conn.Close()
	}
}

// Checkpoint runs a passive checkpoint (one that waits for no reader or
// writer) on conn, one at a time, and notes how many frames the WAL holds.
// On a tight disk it truncates the WAL instead, or copies nothing and
// says the disk is full while the copy would not fit (checkpointMode).
// Run by the writer between its transactions, nothing is committed
// meanwhile and the checkpoint copies every frame that no reader still
// needs.
func (u *Upkeep) Checkpoint(ctx context.Context, conn *sql.Conn) error {
	if u.off {
		return errNoCheckpoints
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	mode, err := u.checkpointMode(ctx, conn)
	if err != nil {
		return err
	}
	var busy, frames, copied int64
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &copied)
	if err != nil {
		return err
	}
	u.frames.Store(frames)
	return nil
}

// errPinned says a checkpoint left frames that a reader's snapshot still
// needs, so the WAL could not start over; the writer tries again before
// its next transaction.
var errPinned = errors.New("checkpoint: frames still in use by a reader")

// restartWait bounds how long restartWAL waits for readers of old frames;
// after restarts that readers kept from starting the WAL over, it waits
// twice as long each time, up to restartWaitMax. On a loaded machine many
// short reads of log -f followers overlap, and a WAL whose restart missed
// grows by another transaction of output each time.
const (
	restartWait    = 100 * time.Millisecond
	restartWaitMax = 800 * time.Millisecond
)

// restartWAL copies the whole WAL into the database file and starts it
// over (a RESTART checkpoint), waiting up to restartWait for readers that
// still read old frames: readers hold a snapshot for one read, so a moment
// is enough. A passive checkpoint here, leaving the restart to the next
// write, missed it whenever a read overlapped, and the WAL grew by another
// WALRestartFrames each time with a few log -f followers. Against a reader that keeps a snapshot for long (an
// open transaction in the sqlite3 shell) it gives up after restartWait,
// and the next transaction tries again.
func (u *Upkeep) restartWAL(ctx context.Context, conn *sql.Conn) (err error) {
	if u.off {
		return errNoCheckpoints
	}
	if _, err := u.checkpointMode(ctx, conn); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var busyMS int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busyMS); err != nil {
		return err
	}
	wait := min(restartWait<<min(u.restartMisses, 3), restartWaitMax)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err != nil {
		return err
	}
	defer func() {
		if _, rerr := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyMS)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	var busy, frames, copied int64
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	if busy != 0 {
		u.restartMisses++
		u.frames.Store(frames)
		return errPinned
	}
	u.restartMisses = 0
	return nil
}

// freeBytes returns the space available on the file system of path.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// CheckRoom returns an error wrapping vocab.ErrDiskFull when writing n
// bytes of output (and the pages around them) beside the database would
// leave less than MinFree.
func (u *Upkeep) CheckRoom(n int64) error {
	free, ok := freeBytes(u.d.Path)
	if !ok {
		return nil // cannot tell: let SQLite find out
	}
	if need := n + n/4 + u.minFree; free < need {
		return fmt.Errorf("%w: %s free on the database's file system, %s kept for status changes",
			vocab.ErrDiskFull, parse.FormatSize(free), parse.FormatSize(u.minFree))
	}
	return nil
}

// RoomForWAL is CheckRoom for output written to the database: its n bytes
// (and the pages around them) take room twice, in the WAL now and in the
// database file when a checkpoint copies them there, and so do the WAL's
// pages not copied yet. A WAL allowed to take the room its own copy needs
// could never be copied: output stayed dropped after space returned, and
// the WAL kept its space for good. conn is the writer's connection.
func (u *Upkeep) RoomForWAL(ctx context.Context, conn *sql.Conn, n int64) error {
	free, ok := freeBytes(u.d.Path)
	if !ok {
		return nil // cannot tell: let SQLite find out
	}
	grow := n + n/4
	wal := fileSize(u.d.Path + "-wal")
	if free >= 2*grow+wal+u.minFree {
		return nil // even a copy of the whole WAL fits
	}
	if need := 2*grow + u.copyGrowth(ctx, conn, wal) + u.minFree; free < need {
		return fmt.Errorf("%w: %s free on the database's file system, %s needed to store %s of output and copy it into the database, %s kept for status changes",
			vocab.ErrDiskFull, parse.FormatSize(free), parse.FormatSize(need), parse.FormatSize(n), parse.FormatSize(u.minFree))
	}
	return nil
}

// copyGrowth returns by how much copying the WAL would grow the database
// file: the pages of the newest snapshot past the file's end (a
// checkpoint rewrites the others in place). It is at most wal, the WAL's
// size, which is the answer when SQLite cannot be asked.
func (u *Upkeep) copyGrowth(ctx context.Context, conn *sql.Conn, wal int64) int64 {
	var pages, pageSize int64
	if conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages) != nil ||
		conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize) != nil {
		return wal
	}
	return min(max(pages*pageSize-fileSize(u.d.Path), 0), wal)
}

// Tight reports whether the database's file system has less than twice
// MinFree free beside the WAL: a checkpoint may then take the reserve.
func (u *Upkeep) Tight() (free int64, tight bool) {
	free, ok := freeBytes(u.d.Path)
	if !ok {
		return 0, false
	}
	return free, free < 2*u.minFree+fileSize(u.d.Path+"-wal")
}

// checkpointMode returns how to checkpoint on conn: PASSIVE while there is
// room, TRUNCATE on a tight disk when what the copy adds to the database
// file fits, and an error wrapping vocab.ErrDiskFull when it does not.
func (u *Upkeep) checkpointMode(ctx context.Context, conn *sql.Conn) (string, error) {
	free, tight := u.Tight()
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
	if growth := pages*pageSize - fileSize(u.d.Path); free < growth+checkpointMargin {
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
// disk is tight and the copy fits (see Room on the disk above); it does
// nothing otherwise. A supervisor calls it before recording a job's end,
// so that the end finds the whole reserve. It returns whether the disk was
// tight.
func (u *Upkeep) Reclaim(ctx context.Context) bool {
	if _, tight := u.Tight(); !tight {
		return false
	}
	conn, err := u.d.Conn(ctx)
	if err != nil {
		return true
	}
	defer conn.Close()
	_ = u.Checkpoint(ctx, conn) // a failure leaves the reserve as it is
	return true
}
