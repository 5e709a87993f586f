package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	_ "modernc.org/sqlite" // the driver jobs uses
)

// rawRowBytes and rawTxBytes shape the raw-SQLite baseline: the bytes go in
// as 64 KiB BLOB rows, many rows per transaction. That is the storage
// engine's own pace with the connection settings jobs uses (db.DSN: WAL,
// synchronous=NORMAL, immediate transactions), without any bookkeeping.
const (
	rawRowBytes = 64 << 10
	rawTxBytes  = 16 << 20
)

// rawInsert copies src into a fresh SQLite database at path as 64 KiB rows
// in pages of pageSize bytes (4096 is what jobs uses) and returns how long
// it took (open and schema excluded, final commit and close included).
func rawInsert(ctx context.Context, path, src string, pageSize int) (time.Duration, error) {
	os.Remove(path)
	// The page size is fixed when the first table is written, before WAL
	// mode (db.DSN) makes it final.
	setup, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return 0, err
	}
	_, err = setup.ExecContext(ctx, fmt.Sprintf(`PRAGMA page_size = %d; CREATE TABLE raw (id INTEGER PRIMARY KEY, data BLOB NOT NULL) STRICT`, pageSize))
	if cerr := setup.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	sqldb, err := sql.Open("sqlite", db.DSN(path))
	if err != nil {
		return 0, err
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	var got int
	if err := sqldb.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&got); err != nil {
		return 0, err
	}
	if got != pageSize {
		return 0, fmt.Errorf("page size %d, want %d", got, pageSize)
	}
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, rawRowBytes)
	begin := time.Now()
	var tx *sql.Tx
	var stmt *sql.Stmt
	inTx := 0
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			if tx == nil {
				if tx, err = sqldb.BeginTx(ctx, nil); err != nil {
					return 0, err
				}
				if stmt, err = tx.PrepareContext(ctx, `INSERT INTO raw (data) VALUES (?)`); err != nil {
					return 0, err
				}
			}
			if _, err := stmt.ExecContext(ctx, buf[:n]); err != nil {
				return 0, fmt.Errorf("insert: %w", err)
			}
			inTx += n
			if inTx >= rawTxBytes {
				stmt.Close()
				if err := tx.Commit(); err != nil {
					return 0, err
				}
				tx, inTx = nil, 0
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	if tx != nil {
		stmt.Close()
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	if err := sqldb.Close(); err != nil {
		return 0, err
	}
	return time.Since(begin), nil
}
