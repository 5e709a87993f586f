package e2e

import (
	"database/sql"
	"sync"
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
)

// chunkColumns are the columns of a chunks row that chunkBytes takes, in
// its order: a query that reads stored output by hand selects them.
const chunkColumns = `data, size, data_ref`

// chunkBytes is the output a chunks row of the database d holds, given its
// data, size and data_ref columns (chunkColumns): a chunk of a flood may
// be stored compressed, or its bytes in the output data file beside the
// database (docs/schema.md), read here as the sqlite3 shell would, from
// that file's chunk_data table.
func chunkBytes(t testing.TB, d *sql.DB, data []byte, size, ref sql.NullInt64) []byte {
	t.Helper()
	if ref.Valid {
		o := outputFileOf(t, d)
		var b []byte
		if err := o.QueryRow(`SELECT data FROM chunk_data WHERE id = ?`, ref.Int64).Scan(&b); err != nil {
			t.Fatalf("read output data row %d: %v", ref.Int64, err)
		}
		if int64(len(b)) != size.Int64 {
			t.Fatalf("output data row %d holds %d bytes, its chunk says %d", ref.Int64, len(b), size.Int64)
		}
		return b
	}
	out, err := logs.DecodeChunk(data, size)
	if err != nil {
		t.Fatalf("decode chunk: %v", err)
	}
	return out
}

// outputFiles are the output data files opened by outputFileOf, by path.
var outputFiles sync.Map

// outputFileOf opens, read-only, the output data file of the database d
// is open on (its path from PRAGMA database_list).
func outputFileOf(t testing.TB, d *sql.DB) *sql.DB {
	t.Helper()
	var seq int
	var name, path string
	if err := d.QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &path); err != nil {
		t.Fatalf("the database's path: %v", err)
	}
	out := db.OutputPath(path)
	if o, ok := outputFiles.Load(out); ok {
		return o.(*sql.DB)
	}
	// The busy timeout covers the moments a WAL's reader waits (its
	// recovery after a crash).
	o, err := sql.Open("sqlite", "file:"+out+"?mode=ro&_pragma=busy_timeout(60000)")
	if err != nil {
		t.Fatal(err)
	}
	if got, loaded := outputFiles.LoadOrStore(out, o); loaded {
		o.Close()
		return got.(*sql.DB)
	}
	return o
}
