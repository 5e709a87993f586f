package logs

import (
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
)

// TestOutputWriterCacheStaysBounded: the connection that stores a flood's
// bytes in the output data file is replaced, which frees its page cache,
// before the first transaction after the cache passed its bound. SQLite
// bounds a cache in pages and lets a full one take the pages of the
// process's other caches: the file's 64 KiB pages took the places of the
// database's 4 KiB ones, and without the replacement this cache grew past
// 15 MiB in 128 MiB of output (past 30 MiB in 512 MiB). The bound here is
// lower than the default so that a short flood crosses it. How far the
// cache grows within one transaction depends on the other caches of the
// process (the package's other tests), so the test checks the rule, and
// the peak only against a bound that such growth cannot reach.
func TestOutputWriterCacheStaysBounded(t *testing.T) {
	t.Parallel()
	const limit = 12 << 20
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{outCacheLimit: limit})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	piece := randomOutput(t, 8<<20)
	type seen struct {
		conn  any
		bytes int64
	}
	var after []seen // the writer's connection there after each flush
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
			n, err = db.CacheBytes(out)
		}
		<-a.flushing
		if out == nil {
			t.Fatal("the flood's bytes did not go to the output data file")
		}
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, seen{out, n})
	}
	var peak int64
	replaced := 0
	for i, s := range after {
		peak = max(peak, s.bytes)
		if i == 0 {
			continue
		}
		prev := after[i-1]
		if s.conn != prev.conn {
			replaced++
		} else if prev.bytes > limit {
			t.Errorf("flush %d: the writer kept the connection whose cache held %d KiB, past its %d KiB", i, prev.bytes>>10, limit>>10)
		}
	}
	if replaced == 0 {
		t.Fatalf("the cache never passed its bound (peak %d KiB): the flood is too short to test anything", peak>>10)
	}
	// The bound is checked before each transaction, and one transaction
	// adds at most outTxBytes of pages: twice that is room to spare.
	if peak > limit+2*outTxBytes {
		t.Errorf("the output data file's writer cached %d KiB, more than its %d KiB and a transaction", peak>>10, limit>>10)
	}
	t.Logf("cache peaked at %d KiB; the connection was replaced %d times", peak>>10, replaced)
}
