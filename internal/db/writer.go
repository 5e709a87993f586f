package db

import (
	"context"
	"time"
)

// FinalWriteTimeout bounds the writes that must land even while their
// writer shuts down or its caller has gone: a job's final status, its last
// output, events.
const FinalWriteTimeout = 15 * time.Second

// CheckForWriter refuses a database that a supervisor must not write: one
// that cannot be written (read-only mount, another user's directory), one
// already removed or replaced, or one SQLite finds damaged. A supervisor
// runs it before it writes anything or spawns a job; a client that starts
// a detached supervisor runs it first too, so that the refusal reaches the
// user.
func (d *DB) CheckForWriter(ctx context.Context) error {
	if err := d.CheckWritable(); err != nil {
		return err
	}
	if err := d.CheckFile(); err != nil {
		return err
	}
	return d.CheckIntegrity(ctx)
}
