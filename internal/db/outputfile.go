package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// The output data file.
//
// The bytes of a flood's chunks that do not compress (random or already
// compressed output) are stored in a second SQLite file beside the
// database, OutputPath (jobs.db-output), with 64 KiB pages, while every
// other row, the chunk rows' offsets, lines and sizes included, stays in
// the database's 4 KiB pages. SQLite writes each page it changes whole, so
// 64 KiB of output costs one page write there instead of sixteen; small
// transactions (a job's start, its end, an event) keep writing small
// pages.
//
// The file has a WAL of its own, as the database has (OutputDSN): readers
// never wait for its writer, nor the writer for them, and a supervisor
// stopped in the middle of a commit (SIGSTOP) stops no read. (A rollback
// journal, which writes a flood's appended pages once instead of twice,
// made every read wait while a commit was under way, and fail while its
// writer was stopped there.) Its commits are synchronous=FULL: the bytes
// are on the disk before the chunk rows that name them commit, which a
// power loss then cannot keep without them; and bytes leave it only once
// the database's commits that stopped naming them are on the disk
// (FreeOutputData, SweepOutputData), so that a power loss, which may undo
// the database's last commits, brings back no row without its bytes. Its
// checkpoints are the
// appender's, as the database's are (Upkeep). Litestream, which replicates
// one database, is left checkpoints with JOBS_CHECKPOINT=off: then no
// output goes to this file (logs.Appender), and jobs.db alone holds every
// byte.
//
// A chunk row whose bytes are there has data_ref set: the id of its row in
// the table chunk_data of that file, its data empty and its size the
// length of the output it holds. The two files commit one after the
// other, never together: the writer commits the bytes first and the chunk
// rows that name them after, so a chunk row never names bytes that were
// not committed. A crash between the two leaves bytes no chunk names,
// which SweepOutputData deletes, as it does the bytes of chunks deleted
// since (chunk rows go with their job, or when the output is evicted or
// cleared, and the file's rows are not deleted with them). A reader reads
// the chunk rows first and the bytes after, so it finds the bytes of every
// row it read, unless they were freed in between: ErrOutputDataGone. The
// read is then tried again holding a snapshot of the file taken before its
// snapshot of the database (HoldOutput), which keeps every byte it can
// name.
//
// In the sqlite3 shell:
//
//	ATTACH 'jobs.db-output' AS output;
//	SELECT c.byte_offset, coalesce(o.data, c.data) FROM chunks c
//	    LEFT JOIN output.chunk_data o ON o.id = c.data_ref
//	    WHERE c.job_id = '...' ORDER BY c.byte_offset;

// OutputPath is the output data file of the database at path.
func OutputPath(path string) string { return path + "-output" }

// OutputPageSize is the page size of the output data file.
const OutputPageSize = 64 << 10

// ErrOutputDataGone is returned for a chunk row whose bytes are not in the
// output data file: swept after the read found the row (the read is tried
// again), or lost with the file.
var ErrOutputDataGone = errors.New("the chunk's bytes are not in the output data file")

const outputSchema = `CREATE TABLE IF NOT EXISTS chunk_data (
    id     INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    data   BLOB NOT NULL
) STRICT`

// outputFile is the lazily opened output data file of a DB.
type outputFile struct {
	mu sync.Mutex
	d  *DB // nil until opened
}

// Output returns the output data file of d, opening it (and, with create,
// creating it) on first use. Without create, a missing file is
// ErrOutputDataGone: a reader has nothing to read from it. The returned DB
// is d's until d closes.
func (d *DB) Output(ctx context.Context, create bool) (*DB, error) {
	d.out.mu.Lock()
	defer d.out.mu.Unlock()
	if d.out.d != nil {
		return d.out.d, nil
	}
	path := OutputPath(d.Path)
	if !create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w (%s is missing)", ErrOutputDataGone, path)
		}
	}
	o, err := openOutput(ctx, path, d.readOnly)
	if err != nil {
		return nil, err
	}
	d.out.d = o
	return o, nil
}

// closeOutput closes d's output data file if it was opened.
func (d *DB) closeOutput() error {
	d.out.mu.Lock()
	defer d.out.mu.Unlock()
	if d.out.d == nil {
		return nil
	}
	err := d.out.d.Close()
	d.out.d = nil
	return err
}

// openOutput opens the output data file at path, creating it 0600 with
// 64 KiB pages and incremental auto-vacuum when new. Several processes may
// create it at once (the first commands on a new database): as for the
// database itself (initFile), a busy answer, which SQLite gives without
// waiting where waiting could deadlock, is tried again for InitPatience.
func openOutput(ctx context.Context, path string, readOnly bool) (*DB, error) {
	deadline := time.Now().Add(InitPatience)
	pause := 2 * time.Millisecond
	for {
		o, err := openOutputOnce(ctx, path, readOnly)
		if err == nil || !IsBusy(err) || time.Now().After(deadline) {
			return o, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func openOutputOnce(ctx context.Context, path string, readOnly bool) (*DB, error) {
	if readOnly {
		// As the database was: read-only, immutable where nothing can
		// change it (a read-only directory or medium).
		return openReadOnly(path)
	}
	fi, err := prepareFile(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		if err := initOutputOnce(ctx, path); err != nil {
			return nil, fmt.Errorf("open output data file %s: %w", path, err)
		}
	}
	conn := &connector{dsn: OutputDSN(path), path: path, file: fi}
	sqldb := sql.OpenDB(conn)
	o := &DB{DB: sqlx.NewDb(sqldb, "sqlite"), Path: path, Now: time.Now, file: fi, writes: newWriteQueue()}
	if _, err := o.ExecContext(ctx, outputSchema); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("open output data file %s: %w", path, cleanSQLiteError(err))
	}
	return o, nil
}

// OutputDSN returns the connection string for the output data file at
// path: its WAL, synchronous=FULL (its commits come before those of the
// chunk rows that name their bytes), the busy timeout, and write
// transactions that begin IMMEDIATE.
func OutputDSN(path string) string {
	return dsn(path, "journal_mode(WAL)", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()), "synchronous(FULL)")
}

// initOutputOnce sets the page size and auto-vacuum of a new output data
// file, which only its first page fixes, then its journal (OutputDSN). The
// pragmas run as statements, in this order, on one connection: as the
// driver's _pragma parameters they run in lexical order, and auto_vacuum
// fixed the page size at SQLite's default before page_size came.
func initOutputOnce(ctx context.Context, path string) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	sqldb := sql.OpenDB(&connector{dsn: "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode(), path: path})
	defer sqldb.Close()
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return cleanSQLiteError(err)
	}
	defer conn.Close()
	for _, stmt := range []string{
		fmt.Sprintf("PRAGMA page_size = %d", OutputPageSize),
		"PRAGMA auto_vacuum = INCREMENTAL",
		outputSchema,
		"PRAGMA journal_mode = WAL",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return cleanSQLiteError(err)
		}
	}
	return nil
}

// ReadOutputData reads the bytes stored under id in the output data file
// o, appending them to dst.
func ReadOutputData(ctx context.Context, o *DB, id int64, dst []byte) ([]byte, error) {
	return readOutputData(ctx, o, id, dst)
}

// OutputHold is a read transaction on the output data file: a snapshot of
// it, which deletes committed after it began do not change. A read of the
// database that begins after it finds the bytes of every chunk row it
// reads there, whatever is evicted, cleared or swept meanwhile (the chunk
// rows go first, their bytes after).
type OutputHold struct {
	conn  *sql.Conn
	begun bool
}

// HoldOutput opens a read transaction on the output data file of d, which
// the caller ends with Release. A missing file is ErrOutputDataGone.
func (d *DB) HoldOutput(ctx context.Context) (*OutputHold, error) {
	o, err := d.Output(ctx, false)
	if err != nil {
		return nil, err
	}
	conn, err := o.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("hold output data: %w", err)
	}
	h := &OutputHold{conn: conn}
	// A deferred transaction takes its snapshot at its first read and
	// keeps it to its end. (BEGIN is written out: the connection's
	// transactions begin IMMEDIATE.)
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		h.Release()
		return nil, fmt.Errorf("hold output data: %w", err)
	}
	h.begun = true
	var n int64
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM chunk_data LIMIT 1)`).Scan(&n); err != nil {
		h.Release()
		return nil, outputReadError(err)
	}
	return h, nil
}

// Read appends to dst the bytes stored under id.
func (h *OutputHold) Read(ctx context.Context, id int64, dst []byte) ([]byte, error) {
	return readOutputData(ctx, h.conn, id, dst)
}

// Release ends the hold.
func (h *OutputHold) Release() {
	if !h.begun {
		h.conn.Close()
		return
	}
	if _, err := h.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		// Never back to the pool with the lock held.
		_ = h.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	h.conn.Close()
}

func readOutputData(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id int64, dst []byte) ([]byte, error) {
	var b []byte
	if err := q.QueryRowContext(ctx, `SELECT data FROM chunk_data WHERE id = ?`, id).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return dst, fmt.Errorf("%w (row %d)", ErrOutputDataGone, id)
		}
		return dst, outputReadError(err)
	}
	return append(dst, b...), nil
}

// outputReadError is err, a failed read of the output data file.
func outputReadError(err error) error {
	return fmt.Errorf("read output data: %w", err)
}

// sweepPage is how many output data rows SweepOutputData looks at in one
// hold of the write lock.
const sweepPage = 64

// SweepOutputData deletes from the output data file the bytes that no
// chunk row names: those of chunks deleted since (jobs removed, expired or
// cleared, output evicted) and those a crash left between the file's
// commit and the database's. It returns how many rows it deleted. Each
// page of rows is checked while this connection holds the database's
// write lock, so that no writer is between its two commits then: bytes
// committed there whose chunk rows are about to be committed are never
// taken for leftovers.
func (d *DB) SweepOutputData(ctx context.Context) (int64, error) {
	if d.readOnly {
		return 0, nil
	}
	if _, err := os.Stat(OutputPath(d.Path)); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	o, err := d.Output(ctx, false)
	if err != nil {
		return 0, fmt.Errorf("sweep output data: %w", err)
	}
	var last, deleted int64
	for {
		var ids []int64
		if err := o.SelectContext(ctx, &ids, `SELECT id FROM chunk_data WHERE id > ? ORDER BY id LIMIT ?`, last, sweepPage); err != nil {
			return deleted, fmt.Errorf("sweep output data: %w", err)
		}
		if len(ids) == 0 {
			if deleted > 0 {
				if _, err := o.ReleaseFreePages(ctx); err != nil {
					return deleted, fmt.Errorf("sweep output data: %w", err)
				}
			}
			return deleted, nil
		}
		last = ids[len(ids)-1]
		n, err := d.sweepOutputPage(ctx, o, ids)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("sweep output data: %w", err)
		}
	}
}

func (d *DB) sweepOutputPage(ctx context.Context, o *DB, ids []int64) (int64, error) {
	unlock, err := d.LockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	tx, err := d.BeginTxx(ctx, nil) // IMMEDIATE (DSN): the write lock
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // nothing is written to the database
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	var named []int64
	if err := tx.SelectContext(ctx, &named, `SELECT data_ref FROM chunks WHERE data_ref IN `+ValuesSQL(1, len(ids)), args...); err != nil {
		return 0, err
	}
	keep := make(map[int64]bool, len(named))
	for _, id := range named {
		keep[id] = true
	}
	var gone []any
	for _, id := range ids {
		if !keep[id] {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	// The commits that stopped naming them on the disk first: the write
	// lock keeps any other from coming in between.
	if err := syncWAL(d.Path); err != nil {
		return 0, fmt.Errorf("sync the WAL: %w", err)
	}
	res, err := o.ExecContext(ctx, `DELETE FROM chunk_data WHERE id IN `+ValuesSQL(1, len(gone)), gone...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// syncWAL makes every commit of the database so far durable: its commits
// are synchronous=NORMAL, written to the WAL without waiting for the disk,
// and a power loss may undo the last of them. Deleting bytes from the
// output data file (synchronous=FULL) must wait for it when a commit of
// the database stopped naming them: undone, that commit would bring back
// chunk rows whose bytes are gone. The WAL file holds every commit not
// yet copied into the database file (a checkpoint syncs both before it
// starts the WAL over), whoever wrote it; with no WAL, the file has them.
// A variable, so that tests can fail it.
var syncWAL = func(path string) error {
	f, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// FreeOutputData deletes the bytes stored under ids from the output data
// file, on out, a connection to it outside any transaction, once the
// database's commits so far are on the disk (syncWAL): the caller has
// committed the deletion of the chunk rows that named them. What it could
// not delete stays until SweepOutputData.
func (d *DB) FreeOutputData(ctx context.Context, out *sql.Conn, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if err := syncWAL(d.Path); err != nil {
		return fmt.Errorf("free output data: sync the WAL: %w", err)
	}
	if _, err := out.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("free output data: %w", err)
	}
	err := Runs(len(ids), func(lo, hi int) error {
		args := make([]any, 0, hi-lo)
		for _, id := range ids[lo:hi] {
			args = append(args, id)
		}
		_, err := out.ExecContext(ctx, `DELETE FROM chunk_data WHERE id IN `+ValuesSQL(1, hi-lo), args...)
		return err
	})
	if err == nil {
		_, err = out.ExecContext(ctx, "COMMIT")
	}
	if err != nil {
		_, _ = out.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("free output data: %w", err)
	}
	return nil
}
