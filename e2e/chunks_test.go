package e2e

import (
	"database/sql"
	"testing"

	"github.com/agentjobs/jobs/internal/logs"
)

// chunkBytes is the output a chunks row holds, given its data and size
// columns: a chunk of a flood may be stored compressed (docs/schema.md).
func chunkBytes(t testing.TB, data []byte, size sql.NullInt64) []byte {
	t.Helper()
	out, err := logs.DecodeChunk(data, size)
	if err != nil {
		t.Fatalf("decode chunk: %v", err)
	}
	return out
}
