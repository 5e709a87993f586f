// Package db stores jobs, their status transitions and the supervisors that
// own them in one SQLite database.
//
// Open creates the file (0600, in a 0700 directory), sets WAL, foreign keys,
// the busy timeout and immediate write transactions on every pooled
// connection through the connection string, and applies the embedded goose
// migrations. A database written by a newer binary is refused (vocab.ErrTooNew),
// and so is a file that holds another program's tables (vocab.ErrNotJobs),
// which is looked at read-only before anything is written. OpenForReads, for
// callers that only read, never migrates an older schema (vocab.ErrTooOld).
//
// The jobs table is changed in a few narrow ways: CreateJob inserts a job in
// status starting (checking name uniqueness and running limits in the same
// transaction), Transition is the one function that moves a job between
// statuses (a conditional UPDATE plus its event row, in one transaction), and
// a handful of setters touch bookkeeping columns (stdin state, last access,
// read cursor). Output chunks are written by package logs, which keeps the
// output counters of the jobs row through the functions of output.go, run
// on its own connection or transaction; logs owns the chunks table, this
// package the jobs row.
//
// The WAL's upkeep is here too: Upkeep checkpoints the WAL beside the one
// writer that writes much (the output appender of a supervisor), starts it
// over, and keeps the disk's reserve for status changes (wal.go). Every
// connection keeps its prepared statements in one cache (stmtcache.go).
//
// Storage rows are private to this package; every table has one converter
// that turns its row into the domain type (Job, Event, Supervisor).
// Timestamps are ISO-8601 UTC text (FormatTime), so the sqlite3 shell shows
// them as they are. docs/schema.md describes every table, column and view.
package db
