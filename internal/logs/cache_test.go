package logs

import (
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
)

// TestOutputWriterCacheStaysBounded: the connection that stores a flood's
// bytes in the output data file keeps its page cache near its bound
// however long the flood. SQLite bounds a cache in pages and lets a full
// one take the pages of the process's other caches: the file's 64 KiB
// pages took the places of the database's 4 KiB ones, and without the
// bound this cache grew past 15 MiB in 128 MiB of output (past 30 MiB in
// 512 MiB). The bound here is lower than the default so that a short
// flood crosses it.
func TestOutputWriterCacheStaysBounded(t *testing.T) {
	t.Parallel()
	const limit = 12 << 20
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{outCacheLimit: limit})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	piece := randomOutput(t, 8<<20)
	var peak int64
	conns := map[any]bool{}
	for range testlong.Pick(16, 64) {
		for p := piece; len(p) > 0; p = p[64<<10:] {
			write(t, a, id, Stdout, p[:64<<10])
		}
		flush(t, a)
		a.flushing <- struct{}{}
		out := a.w.out
		var n int64
		var err error
		if out != nil {
			conns[out] = true
			n, err = db.CacheBytes(out)
		}
		<-a.flushing
		if out == nil {
			t.Fatal("the flood's bytes did not go to the output data file")
		}
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, n)
	}
	// Checked before each transaction, the cache may pass the bound by
	// what one transaction adds: a page or two.
	if peak > limit+1<<20 {
		t.Fatalf("the output data file's writer cached %d KiB, more than its %d KiB", peak>>10, limit>>10)
	}
	if len(conns) < 2 {
		t.Fatalf("the writer kept one connection to the output data file through the flood (cache peaked at %d KiB)", peak>>10)
	}
	t.Logf("cache peaked at %d KiB over %d connections", peak>>10, len(conns))
}
