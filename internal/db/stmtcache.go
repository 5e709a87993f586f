package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/agentjobs/jobs/internal/vocab"
	"modernc.org/sqlite"
)

// stmtCacheSize bounds the prepared statements kept per connection. The
// project runs a few dozen distinct statements; the output appender's
// connection alone runs about 60, its multi-row statements in 7 widths
// each (MaxRunRows). A bound keeps generated ones from growing without
// limit.
const stmtCacheSize = 128

// connector opens SQLite connections that keep their prepared statements.
//
// modernc.org/sqlite compiles a statement's SQL on every Exec or Query
// that is not made through a prepared statement, and database/sql prepares
// nothing by itself: a long-lived process (the supervisor, an MCP server,
// an embedding program) spent a fifth of its time in the SQL parser, running
// the same few statements. Each connection here keeps the statements it ran,
// keyed by their text, and runs a statement again without compiling it.
//
// Its connections also turn SQLITE_CORRUPT and SQLITE_NOTADB into a
// *vocab.CorruptError naming the file, whichever statement meets them, so that
// every verb and layer reports a damaged database in the same words.
type connector struct {
	dsn  string
	path string      // the database file, for vocab.CorruptError
	file os.FileInfo // the file Open prepared; nil: not checked
	drv  sqlite.Driver
}

func (c *connector) Connect(context.Context) (driver.Conn, error) {
	// SQLite opens the path, which may name another file by now: a
	// connection to it would write this pool's rows (a job's end) into
	// the wrong database. One stat(2) per new connection, which also
	// names the file the connection counts as in use.
	fi, err := os.Stat(c.path)
	if c.file != nil && (err != nil || !os.SameFile(fi, c.file)) {
		return nil, &vocab.ReplacedError{Path: c.path}
	}
	release := func() {}
	if err == nil {
		release = useFile(fi) // see inUse
	}
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		release()
		return nil, asCorrupt(c.path, err)
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		// Not the driver this was written for: use it as it is.
		release()
		return conn, nil
	}
	return &cachingConn{sqliteConn: inner, path: c.path, stmts: map[string]*cachedStmt{}, closed: release}, nil
}

func (c *connector) Driver() driver.Driver { return &c.drv }

// sqliteConn is what modernc.org/sqlite's connections implement and
// database/sql looks for.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a connection with a cache of prepared statements.
// database/sql uses a connection from one goroutine at a time, but a Rows
// may be closed from the goroutine that watches its context, hence mu.
type cachingConn struct {
	sqliteConn
	path   string
	closed func() // counts the connection closed (see inUse)

	mu    sync.Mutex
	stmts map[string]*cachedStmt
	clock uint64 // counts uses, for least-recently-used eviction
}

type cachedStmt struct {
	stmt interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	busy    bool // a Rows reads from it
	lastUse uint64
}

// acquire returns the cached statement for query, preparing it on first
// use, marked busy; nil when it is busy already (a query nested in the
// reading of its own results) or cannot be prepared here, so that the
// caller runs query uncached.
func (c *cachingConn) acquire(ctx context.Context, query string) *cachedStmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil
		}
		s.busy, s.lastUse = true, c.clock
		return s
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil // the uncached call reports the error
	}
	st, ok := ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		ds.Close()
		return nil
	}
	if len(c.stmts) >= stmtCacheSize {
		c.evictLocked()
	}
	s := &cachedStmt{stmt: st, busy: true, lastUse: c.clock}
	c.stmts[query] = s
	return s
}

// evictLocked drops the least recently used statement that is not busy.
func (c *cachingConn) evictLocked() {
	var oldest string
	var at uint64
	for q, s := range c.stmts {
		if !s.busy && (oldest == "" || s.lastUse < at) {
			oldest, at = q, s.lastUse
		}
	}
	if oldest != "" {
		c.stmts[oldest].stmt.Close()
		delete(c.stmts, oldest)
	}
}

func (c *cachingConn) release(s *cachedStmt) {
	c.mu.Lock()
	s.busy = false
	c.mu.Unlock()
}

// tracer, when set, is told the text of every statement a connection runs
// or prepares.
var tracer atomic.Pointer[func(query string)]

// TraceQueries calls fn with the text of every statement that connections
// of any DB run or prepare from now until stop is called: a test can
// collect the queries that verbs run and check how SQLite plans them.
// fn may be called from several goroutines at once.
func TraceQueries(fn func(query string)) (stop func()) {
	tracer.Store(&fn)
	return func() { tracer.CompareAndSwap(&fn, nil) }
}

func trace(query string) {
	if fn := tracer.Load(); fn != nil {
		(*fn)(query)
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	trace(query)
	s := c.acquire(ctx, query)
	if s == nil {
		res, err := c.sqliteConn.ExecContext(ctx, query, args)
		return res, asCorrupt(c.path, err)
	}
	defer c.release(s)
	res, err := s.stmt.ExecContext(ctx, args)
	return res, asCorrupt(c.path, err)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	trace(query)
	s := c.acquire(ctx, query)
	if s == nil {
		rows, err := c.sqliteConn.QueryContext(ctx, query, args)
		if err != nil {
			return nil, asCorrupt(c.path, err)
		}
		return &cachedRows{Rows: rows, path: c.path, release: func() {}}, nil
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		c.release(s)
		return nil, asCorrupt(c.path, err)
	}
	return &cachedRows{Rows: rows, path: c.path, release: func() { c.release(s) }}, nil
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	trace(query)
	st, err := c.sqliteConn.PrepareContext(ctx, query)
	return st, asCorrupt(c.path, err)
}

// BeginTx starts a transaction. A tracer is told its start and end too,
// as "BEGIN" and "COMMIT" or "ROLLBACK", so that a test sees which
// statements ran in one transaction.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, asCorrupt(c.path, err)
	}
	trace("BEGIN")
	return &corruptTx{Tx: tx, path: c.path}, nil
}

// corruptTx reports a commit that meets a damaged file as a vocab.CorruptError.
type corruptTx struct {
	driver.Tx
	path string
}

func (t *corruptTx) Commit() error {
	trace("COMMIT")
	return asCorrupt(t.path, t.Tx.Commit())
}

func (t *corruptTx) Rollback() error {
	trace("ROLLBACK")
	return t.Tx.Rollback()
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	for q, s := range c.stmts {
		s.stmt.Close()
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	err := c.sqliteConn.Close()
	c.closed()
	return err
}

// cachedRows gives its statement back to the cache when closed. It passes
// on no column type information (sql.Rows.ColumnTypes then reports only
// names): nothing in the project asks for it.
type cachedRows struct {
	driver.Rows
	path    string
	once    sync.Once
	release func()
}

func (r *cachedRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == io.EOF {
		return err
	}
	return asCorrupt(r.path, err)
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.release)
	return err
}

// statusConn is a connection that reports SQLite's per-connection
// counters (sqlite3_db_status).
type statusConn interface {
	Status(op sqlite.DBStatusOp, reset bool) (current, high int, err error)
}

// CacheBytes returns the memory that conn's page caches hold, as SQLite
// counts it (SQLITE_DBSTATUS_CACHE_USED).
func CacheBytes(conn *sql.Conn) (int64, error) {
	var n int
	err := conn.Raw(func(dc any) error {
		if c, ok := dc.(*cachingConn); ok {
			dc = c.sqliteConn
		}
		s, ok := dc.(statusConn)
		if !ok {
			return fmt.Errorf("cache use: %T reports no status", dc)
		}
		var err error
		n, _, err = s.Status(sqlite.DBStatusCacheUsed, false)
		return err
	})
	return int64(n), err
}
