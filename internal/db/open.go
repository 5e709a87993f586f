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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/migrations"
)

// BusyTimeout is how long a statement waits for another writer's lock before
// it fails with "database is locked".
const BusyTimeout = 10 * time.Second

// InitPatience is how long opening a new, empty database file waits for
// another process that is initialising the same file: the schema's
// creation is a handful of transactions that take milliseconds on an idle
// machine, and a loaded one can stretch them past one busy timeout.
const InitPatience = 2 * time.Minute

// busyTimeout is the busy timeout of the connections a DSN opens:
// BusyTimeout, shortened by tests.
var busyTimeout = BusyTimeout

// DB is an open jobs database.
type DB struct {
	*sqlx.DB
	Path string

	// Now returns the current time; tests replace it.
	Now func() time.Time

	file os.FileInfo   // the file opened at Path, for CheckFile
	side []os.FileInfo // its -wal and -shm, for LetGoOfSideFiles

	readOnly bool // opened by OpenReadOnly

	writes writeQueue // the process's write transactions, one at a time

	out outputFile // the output data file, opened on first use (Output)
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
// the WAL whole, so creating a job, marking it running and then done took
// several times longer with 64 KiB pages than with 4 KiB ones.
func DSN(path string) string {
	return dsn(path, "journal_mode(WAL)", "foreign_keys(1)", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()), "synchronous(NORMAL)")
}

// dsn is the connection string for path with the pragmas given, in that
// order, and write transactions that begin IMMEDIATE.
func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Add("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens the database at path, creating it (mode 0600, in a directory
// created 0700) when it does not exist, and applies pending migrations.
// Files of ours that others may read are tightened first and a database
// owned by another user is refused (see prepareFile).
//
// Open writes nothing to a file SQLite finds damaged: the error is then a
// *vocab.CorruptError, as is that of any later statement that meets damage.
// Open does not read the whole file; a supervisor runs CheckIntegrity
// before it writes.
//
// Its connections do not checkpoint the WAL on their own (SQLite's
// wal_autocheckpoint is off): the output appender of a supervisor copies
// the WAL beside its writes and only while the disk has room for it
// (logs.Appender). A connection checkpointing after its commit could fill
// a nearly full disk with the copy, after which SQLite refuses every write,
// a job's end included. The last connection to close still checkpoints.
//
// A file that holds tables and no jobs schema (another program's
// database) is refused with vocab.ErrNotJobs before anything is written
// to it or its mode is changed: only a new or empty file is set up.
func Open(ctx context.Context, path string) (*DB, error) {
	d, _, err := open(ctx, path, true, false)
	return d, err
}

// OpenForReads is Open for a caller that only reads. It sets up a new or
// empty file as Open does, but never migrates an older schema: a
// supervisor of the older jobs may still be running on it, and would meet
// tables it does not know. Such a database is refused with
// vocab.ErrTooOld, whose message names the verbs that upgrade it.
func OpenForReads(ctx context.Context, path string) (*DB, error) {
	d, _, err := open(ctx, path, false, false)
	return d, err
}

// OpenForReadsHere is OpenForReads for a caller that would rather not
// write to a database that only other hosts' supervisors wrote (another
// host's database, or a copy of it): such a database is reported foreign,
// and not opened, from the same read-only look at the file that checks it
// is a jobs database, instead of a read-only open of its own (about a
// tenth of a read verb's CPU).
func OpenForReadsHere(ctx context.Context, path string) (d *DB, foreign bool, err error) {
	return open(ctx, path, false, true)
}

// open opens path (see Open and OpenForReads). With here, a database
// that only other hosts' supervisors wrote is reported foreign instead.
func open(ctx context.Context, path string, upgrade, here bool) (*DB, bool, error) {
	if path == "" {
		return nil, false, errors.New("open database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, false, fmt.Errorf("open database: %w", err)
	}
	st, err := os.Stat(abs)
	fresh := err != nil || st.Size() == 0
	var seen int64 // the schema version checkOwn saw
	if !fresh {
		// Looked at read-only first: a file that turns out to be
		// another program's must not be tightened, turned into a WAL
		// database or migrated.
		l, err := checkOwn(ctx, abs, here)
		if err != nil || l.foreign {
			return nil, l.foreign, err
		}
		seen = l.version
	}
	fi, err := prepareFile(abs)
	if err != nil {
		return nil, false, err
	}
	if err := unlessInUse(abs, func() error { return checkLostWAL(abs) }); err != nil {
		return nil, false, err
	}
	if fresh {
		if err := initFile(ctx, abs); err != nil {
			return nil, false, fmt.Errorf("open database %s: %w", abs, err)
		}
	}
	conn := &connector{dsn: DSN(abs) + "&" + url.Values{"_pragma": {"wal_autocheckpoint(0)"}}.Encode(), path: abs, file: fi}
	sqldb := sql.OpenDB(conn)
	d := &DB{DB: sqlx.NewDb(sqldb, "sqlite"), Path: abs, Now: time.Now, file: fi, writes: newWriteQueue()}
	if err := d.migrate(ctx, upgrade, seen); err != nil {
		sqldb.Close()
		var ce *vocab.CorruptError
		if errors.As(err, &ce) || errors.Is(err, vocab.ErrTooOld) {
			return nil, false, err
		}
		if werr := checkWritable(abs); werr != nil {
			// SQLite says "unable to open database file" when it cannot
			// create the -shm beside a WAL database: name the cause.
			return nil, false, fmt.Errorf("open database %s: %w", abs, werr)
		}
		return nil, false, fmt.Errorf("open database %s: %w", abs, err)
	}
	return d, false, nil
}

// Close closes the database.
//
// When the file at Path is no longer the one that was opened (moved away,
// or removed), SQLite's last close neither checkpoints nor deletes the
// WAL, because the -wal at the path may belong to another database by
// now. What was written through d is then only in d's (unlinked) WAL:
// Close copies it into the file it has open first, so that a database
// moved away keeps everything written to it.
func (d *DB) Close() error {
	if d.file != nil && !d.readOnly && d.CheckFile() != nil {
		ctx, cancel := context.WithTimeout(context.Background(), BusyTimeout)
		_, _ = d.ExecContext(ctx, `PRAGMA wal_checkpoint(FULL)`)
		cancel()
	}
	oerr := d.closeOutput()
	if err := d.DB.Close(); err != nil {
		return err
	}
	return oerr
}

// ReserveConnections opens n connections and keeps them in the pool, idle
// when unused, so that KeepConnections has connections to keep: a process
// that writes for a long time (a supervisor) must be able to record the end
// of its jobs after its database file was removed or replaced.
func (d *DB) ReserveConnections(ctx context.Context, n int) error {
	d.SetMaxIdleConns(n + 2) // database/sql keeps 2 by default
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := d.Conn(ctx)
		if err != nil {
			return fmt.Errorf("reserve connections: %w", err)
		}
		conns = append(conns, c)
	}
	// With connections held for good, the -wal and -shm they opened stay
	// the same files: note which, for LetGoOfSideFiles.
	d.side = d.side[:0]
	for _, suffix := range sideSuffixes {
		if fi, err := os.Stat(d.Path + suffix); err == nil {
			d.side = append(d.side, fi)
		}
	}
	return nil
}

// LetGoOfSideFiles removes the -wal and -shm at the path when they are
// still the ones d's connections use (as noted by ReserveConnections).
// After the database file was moved away or replaced, those would pair
// with whatever file is at the path now, and SQLite would read d's pages
// from that WAL as if they were the other database's. d's connections go
// on using them through the descriptors they hold.
func (d *DB) LetGoOfSideFiles() {
	for _, suffix := range sideSuffixes {
		fi, err := os.Stat(d.Path + suffix)
		if err != nil {
			continue
		}
		for _, mine := range d.side {
			if os.SameFile(fi, mine) {
				_ = os.Remove(d.Path + suffix)
			}
		}
	}
}

// checkOwn refuses, before anything is written, a file that holds another
// program's tables: it is opened read-only and its schema read. It
// returns the schema version it saw and, with here, whether only other
// hosts' supervisors wrote the file (DB.foreign), read over the same
// connection.
func checkOwn(ctx context.Context, abs string, here bool) (look, error) {
	d, err := openReadOnly(abs)
	if err != nil {
		return look{}, err
	}
	defer d.DB.Close()
	s, err := d.readSchema(ctx)
	if err != nil {
		return look{}, err
	}
	if !s.jobs {
		return look{}, notJobs(abs, s)
	}
	l := look{version: s.version}
	if here {
		l.foreign, err = d.foreign(ctx)
	}
	return l, err
}

// look is what checkOwn saw of a file.
type look struct {
	version int64
	foreign bool
}

// initFile gives a new, empty database file incremental auto-vacuum, so
// that the pages of deleted jobs can go back to the file system (the
// janitor's ReleaseFreePages). The mode can be set only before the file's
// first page is written, and setting it on a database that has tables is
// a write transaction: it is done here, once, by a connection of its own,
// which the driver gives the mode before its journal_mode pragma writes the
// first page; never by every connection. On a file another process has
// initialised meanwhile it changes nothing.
//
// Several processes may initialise the same new file at once (two agents
// starting their first job). SQLite does not call its busy handler where
// waiting could deadlock, and two connections turning one new file into a
// WAL database can meet there; and the other process, once its file is a
// WAL database, creates the schema in one transaction, which on a loaded
// machine can hold the lock longer than one busy timeout. A busy answer is
// tried again, until InitPatience has passed or ctx ends.
func initFile(ctx context.Context, path string) error {
	deadline := time.Now().Add(InitPatience)
	pause := 2 * time.Millisecond
	for {
		err := initFileOnce(ctx, path)
		if err == nil || !IsBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// IsBusy reports whether err is SQLite's SQLITE_BUSY family: another
// connection holds the lock.
func IsBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func initFileOnce(ctx context.Context, path string) error {
	q := url.Values{}
	q.Add("_auto_vacuum", "INCREMENTAL")
	q.Add("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	sqldb := sql.OpenDB(&connector{dsn: DSN(path) + "&" + q.Encode(), path: path})
	defer sqldb.Close()
	if err := sqldb.PingContext(ctx); err != nil {
		return fmt.Errorf("initialise: %w", cleanSQLiteError(err))
	}
	return nil
}

// KeepConnections makes the pool work with the connections it has open
// and open no other: after the file was removed or replaced, a new
// connection would open whatever is at the path now (and the connector
// refuses to). Statements then wait for a free connection.
func (d *DB) KeepConnections() {
	n := max(d.Stats().OpenConnections, 1)
	d.SetMaxIdleConns(n)
	d.SetMaxOpenConns(n)
}

// CheckFile returns a *vocab.ReplacedError when the path no longer names the
// file that Open opened: it was removed, or replaced by another file.
// Writes through d then reach a file nobody else will read. It costs one
// stat(2).
func (d *DB) CheckFile() error {
	if d.file == nil {
		return nil
	}
	fi, err := os.Stat(d.Path)
	if err == nil && os.SameFile(fi, d.file) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check database file: %w", err)
	}
	return &vocab.ReplacedError{Path: d.Path}
}

// FullCheckMax is the largest database CheckIntegrity reads whole.
// quick_check reads every page, and it runs when a supervisor starts,
// which a client waits for: on a large database that wait would pass the
// time a client gives a new supervisor to answer.
const FullCheckMax = 64 << 20

// LargeCheckBudget is how long CheckIntegrity may read a database larger
// than FullCheckMax: the tables of a long history (jobs, events) grow with
// it, and a supervisor's start, which a client waits for, must not.
const LargeCheckBudget = 500 * time.Millisecond

// CheckIntegrity runs SQLite's quick_check and returns a *vocab.CorruptError
// naming the first problem it finds. A database of at most FullCheckMax
// bytes is checked whole; a larger one has every table checked but the
// output chunks, which is most of its pages, and damage there is reported
// by the statements that meet it: the small tables first, then jobs and
// events, for LargeCheckBudget in all (what is left unchecked then is
// reported, like the chunks, by the statements that meet it). It belongs
// where a process is about to write for a long time (a supervisor's
// start), not in every read.
func (d *DB) CheckIntegrity(ctx context.Context) error {
	checks := []string{`PRAGMA quick_check(1)`}
	budget := ctx
	if fi, err := os.Stat(d.Path); err == nil && fi.Size() > FullCheckMax {
		var tables []string
		err := d.SelectContext(ctx, &tables, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name <> 'chunks'
			ORDER BY name IN ('jobs', 'events'), name`)
		if err != nil {
			return d.checkError(err)
		}
		checks = checks[:0]
		for _, t := range tables {
			checks = append(checks, `PRAGMA quick_check("`+strings.ReplaceAll(t, `"`, `""`)+`")`)
		}
		var cancel context.CancelFunc
		budget, cancel = context.WithTimeout(ctx, LargeCheckBudget)
		defer cancel()
	}
	for _, q := range checks {
		var res string
		if err := d.QueryRowxContext(budget, q).Scan(&res); err != nil {
			if budget.Err() != nil && ctx.Err() == nil {
				return nil // out of time: the rest is left to the statements that meet it
			}
			return d.checkError(err)
		}
		if res != "ok" {
			return &vocab.CorruptError{Path: d.Path, Cause: strings.TrimPrefix(res, "*** in database main ***\n")}
		}
	}
	return nil
}

func (d *DB) checkError(err error) error {
	var ce *vocab.CorruptError
	if errors.As(err, &ce) {
		return ce
	}
	return fmt.Errorf("check database %s: %w", d.Path, err)
}

// CheckWritable returns an error naming the path and the cause when the
// database or its directory cannot be written (a read-only mount, a
// directory of another user): SQLite would open such a file and fail at
// the first write, or fail to open a WAL database at all.
func (d *DB) CheckWritable() error {
	if err := checkWritable(d.Path); err != nil {
		return fmt.Errorf("database %s: %w", d.Path, err)
	}
	return nil
}

func checkWritable(path string) error {
	dir := filepath.Dir(path)
	if err := syscall.Access(dir, accessW); err != nil {
		return fmt.Errorf("directory %s is not writable (%w)", dir, err)
	}
	if err := syscall.Access(path, accessW); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file %s is not writable (%w)", path, err)
	}
	return nil
}

// accessW is W_OK of access(2).
const accessW = 0x2

// migrate applies every pending migration through a goose Provider and
// refuses a database whose schema is newer than the embedded migrations.
// Without upgrade it sets up only a database with no migration applied
// (a new file) and refuses an older schema with vocab.ErrTooOld.
//
// Several processes may open a new database at the same moment (two agents
// running their first `jobs start`). Each migration runs in its own
// immediate transaction, so one of them applies it and the others fail on
// objects that now exist; a failed Up is therefore retried while the schema
// version moves, and succeeds once another process has finished the work.
func (d *DB) migrate(ctx context.Context, upgrade bool, seen int64) error {
	// Every CLI call opens the database, and building a goose Provider
	// parses every migration: first ask the version table, which is one
	// query, whether there is anything to do; not even that when the
	// look before the open saw the latest version (seen), which no
	// process takes back.
	if latest, ok := embeddedLatest(); ok {
		if seen == latest {
			return nil
		}
		v, err := d.SchemaVersion(ctx)
		if err == nil && v == latest {
			return nil
		}
		// A damaged file must not reach goose, which writes: with its
		// version table unreadable it would try to create it.
		if errors.Is(err, vocab.ErrCorrupt) {
			return err
		}
		// A new file is set up at once from the latest schema, unless
		// another process began to set it up meanwhile (createLatest).
		if err != nil || v == 0 {
			created, err := d.createLatest(ctx)
			if err != nil {
				return fmt.Errorf("migrate: %w", cleanSQLiteError(err))
			}
			if created && latestVersion() == latest {
				return nil
			}
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
			return fmt.Errorf("%w (schema %d, this binary knows %d): upgrade jobs", vocab.ErrTooNew, current, latest)
		}
		if current == latest {
			return nil
		}
		if !upgrade && current > 0 {
			// Another process may be setting up a new file right now,
			// one migration after another: refuse only a version that
			// stays where it is.
			if current, err = d.settledVersion(ctx, p.GetDBVersion, current, latest); err != nil {
				return err
			}
			if current != latest && !d.neverUsed(ctx) {
				return tooOld(d.Path, current, latest)
			}
			if current == latest {
				continue
			}
			// No job and no supervisor was ever recorded: a first use
			// that stopped part way (its process killed between two
			// migrations). Nothing can be using the older schema, so the
			// read finishes setting the file up.
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

// neverUsed reports whether the database has never recorded a job or a
// supervisor: a file whose first setting up stopped part way.
func (d *DB) neverUsed(ctx context.Context) bool {
	var n int64
	err := d.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM supervisors)`).Scan(&n)
	return err == nil && n == 0
}

// settledVersion reads the schema version until it stops moving (no
// change in 100 ms) or reaches latest, for at most BusyTimeout.
func (d *DB) settledVersion(ctx context.Context, read func(context.Context) (int64, error), v, latest int64) (int64, error) {
	deadline := time.Now().Add(BusyTimeout)
	for v < latest && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		now, err := read(ctx)
		if err != nil {
			return v, fmt.Errorf("read schema version: %w", cleanSQLiteError(err))
		}
		if now == v {
			return v, nil
		}
		v = now
	}
	return v, nil
}

// embeddedLatest returns the highest version among the embedded migration
// files.
func embeddedLatest() (int64, bool) {
	vs := embeddedVersions()
	if len(vs) == 0 {
		return 0, false
	}
	return vs[len(vs)-1], true
}

// embeddedVersions returns the versions of the embedded migration files,
// read from their names (NNNNN_description.sql), in order; none when a
// name does not parse.
func embeddedVersions() []int64 {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil
	}
	var vs []int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

const schemaVersionQuery = `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`

// SchemaVersion reports the newest migration applied to the database.
func (d *DB) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := d.GetContext(ctx, &v, schemaVersionQuery)
	return v, err
}

// cleanSQLiteError keeps a vocab.CorruptError whole through goose's wrapping.
func cleanSQLiteError(err error) error {
	var ce *vocab.CorruptError
	if errors.As(err, &ce) {
		return ce
	}
	return err
}

// asCorrupt returns err as a *vocab.CorruptError for path when SQLite reports
// the file damaged (SQLITE_CORRUPT) or not a database (SQLITE_NOTADB),
// else err unchanged.
func asCorrupt(path string, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return &vocab.CorruptError{Path: path, Cause: se.Error()}
		}
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
	// The output data file: the bytes no chunk names go first.
	if _, err := d.SweepOutputData(ctx); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	if _, err := os.Stat(OutputPath(d.Path)); err != nil {
		return nil
	}
	o, err := d.Output(ctx, false)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	for _, stmt := range []string{`VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := o.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("vacuum %s: %w", o.Path, cleanSQLiteError(err))
		}
	}
	return nil
}

// Size is the database's size on disk: the file and its WAL, and the
// output data file and its WAL.
func (d *DB) Size() int64 {
	var n int64
	out := OutputPath(d.Path)
	for _, p := range []string{d.Path, d.Path + "-wal", out, out + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}
