package db

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// otherProcessEnv makes the test binary another process that opens the
// database named by its value, reads it and closes it (otherProcess).
const otherProcessEnv = "JOBS_DB_TEST_OTHER_PROCESS"

// otherProcess is a second program on the database: it opens it, reads
// and closes it. SQLite's last connection to a WAL database checkpoints
// and deletes the -wal as it closes; it is the last when no other
// process holds a lock on the database file.
func otherProcess(path string) int {
	sqldb, err := sql.Open("sqlite", DSN(path))
	if err == nil {
		var n int
		err = sqldb.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n)
		if cerr := sqldb.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runOtherProcess runs otherProcess on path in a process of its own.
func runOtherProcess(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), otherProcessEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other process: %v\n%s", err, out)
	}
}

// TestSecondOpenKeepsTheFirstOnesLocks: SQLite's locks are POSIX advisory
// locks, which belong to the process: closing any descriptor of the
// database file or its -shm drops every lock the process holds on it,
// SQLite's own included. A second Open in a process whose first one is
// in use (an agent embedding the package, a test opening the file beside
// its client) must not read those files through descriptors of its own:
// another process would then find nobody using the database, and, as
// its last user, checkpoint it and delete the -wal (and take the -shm
// for its own) under the first one's connections, which went on to read
// "database disk image is malformed" or fail with an I/O error on the
// shared memory.
func TestSecondOpenKeepsTheFirstOnesLocks(t *testing.T) {
	ctx := context.Background()
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprintf("second_open=%v", second), func(t *testing.T) {
			first, _ := openTest(t)
			path := first.Path
			// A connection in use, as a follower's between two reads.
			conn, err := first.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, `CREATE TABLE scratch (x); INSERT INTO scratch VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			if second {
				d, err := Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			}
			runOtherProcess(t, path)
			if _, err := os.Stat(path + "-wal"); err != nil {
				t.Fatalf("the other process took itself for the database's last user: %v", err)
			}
			var n int
			if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM scratch`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("the first open reads %d rows, %v; want 1", n, err)
			}
		})
	}
}
