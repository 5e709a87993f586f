package db

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"
)

// writeQueue lets the write transactions of one process take SQLite's
// write lock in turn. SQLite's own wait for the lock (the busy timeout)
// polls: each waiter sleeps and tries again, up to 100 ms apart, and the
// lock goes to whichever tries first after it is free. Fifty starts at
// once on a loaded machine then left some waiting out the whole busy
// timeout while others took the lock again and again, and the start
// failed with "database is locked". In the queue, waiters take the lock
// in the order they came (a channel hands its slot to the longest
// waiting sender), and the busy timeout only bounds the wait for another
// process's writer.
type writeQueue chan struct{}

func newWriteQueue() writeQueue { return make(writeQueue, 1) }

// LockWrites waits until no other write transaction of this process runs,
// or ctx ends, and returns the function that lets the next one go. A
// writer that does not go through DB's methods (the output appender, on
// its own connection) takes it around its transaction. A DB opened read
// only has no queue: unlock is a no-op.
func (d *DB) LockWrites(ctx context.Context) (unlock func(), err error) {
	if d.writes == nil {
		return func() {}, nil
	}
	select {
	case d.writes <- struct{}{}:
		return func() { <-d.writes }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// execWrite runs one statement that writes, in its turn (LockWrites).
func (d *DB) execWrite(ctx context.Context, query string, args ...any) (sql.Result, error) {
	unlock, err := d.LockWrites(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return d.ExecContext(ctx, query, args...)
}

// TxPatience bounds how long a write transaction of DB's methods keeps
// trying to begin while other processes' writers hold the lock: each try
// waits the busy timeout. Several supervisors flooding one database on a
// loaded machine kept the lock busy long enough that a start failed with
// "database is locked" after one busy timeout; nothing has been written
// when BEGIN fails, so trying again is safe.
const TxPatience = time.Minute

// beginPatiently begins a write transaction (BEGIN IMMEDIATE), trying
// again while SQLite answers busy, for up to TxPatience or until ctx ends.
func (d *DB) beginPatiently(ctx context.Context) (*sqlx.Tx, error) {
	deadline := time.Now().Add(TxPatience)
	for {
		tx, err := d.BeginTxx(ctx, nil)
		if err == nil || !IsBusy(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return tx, err
		}
	}
}
