package logs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// Benchmark sizes. By default they are small enough for a quick
// go test -bench; JOBS_BENCH_FULL=1 runs the sizes the design promises
// (a 256 MiB stream, a 1 GiB log), and JOBS_BENCH_APPEND_MIB /
// JOBS_BENCH_LOG_MIB set them by hand.
func benchSize(b *testing.B, env string, small, full int64) int64 {
	b.Helper()
	if testing.Short() {
		b.Skip("big benchmark skipped in -short mode")
	}
	if v := os.Getenv(env); v != "" {
		mib, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mib <= 0 {
			b.Fatalf("%s=%q: want a size in MiB", env, v)
		}
		return mib << 20
	}
	if os.Getenv("JOBS_BENCH_FULL") != "" {
		return full
	}
	return small
}

// benchLine fills p with numbered text lines of varying length, as a build
// log would look.
func benchData(n int) []byte {
	p := make([]byte, 0, n+100)
	for i := 0; len(p) < n; i++ {
		p = fmt.Appendf(p, "%08d compiling module %d of the project with some flags -O2 -g%s\n", i, i%977, "xxxxxxxxxxxxxxxxxxxx"[:i%20])
	}
	return p[:n]
}

// BenchmarkAppend256MiB appends a flooding stream through the Appender
// (chunking, line index, job row bookkeeping and, with the default 64 MiB
// cap, eviction of the middle) and compares its throughput with two
// baselines measured in the same run: the same bytes inserted raw into
// SQLite as 64 KiB rows in 16 MiB transactions (x_raw_sqlite, target >= 0.8;
// x_raw_sqlite_cpu compares the CPU time used, which a busy machine
// disturbs less), inserted raw into the real chunks table (x_raw_chunks:
// the appender's own overhead apart from the schema's indexes), and appended
// to a plain file (x_file). Each iteration runs them all, the appender and
// the raw inserts in alternating order. MiB_wal_max is the largest the WAL
// file grew while the appender wrote.
func BenchmarkAppend256MiB(b *testing.B) {
	benchAppend(b, benchData(benchPiece))
}

// BenchmarkAppendRandom256MiB is BenchmarkAppend256MiB for output that
// does not compress (random bytes): the appender stores the bytes of its
// full chunks in the output data file, with 64 KiB pages, while the raw
// baseline inserts them in the database's 4 KiB pages.
func BenchmarkAppendRandom256MiB(b *testing.B) {
	data := make([]byte, benchPiece)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	benchAppend(b, data)
}

func benchAppend(b *testing.B, data []byte) {
	size := benchSize(b, "JOBS_BENCH_APPEND_MIB", 32<<20, 256<<20)
	b.SetBytes(size)
	var app, raw, rawChunks, file cost
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		runs := []func(){
			func() { app.add(appendStream(b, dir, data, size)) },
			func() { raw.add(insertRaw(b, dir, data, size)) },
			func() { rawChunks.add(insertRawChunks(b, dir, data, size)) },
			func() { file.add(appendFile(b, dir, data, size)) },
		}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, run := range runs {
			run()
		}
	}
	mibps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mibps(app.wall), "MiB/s_appender")
	b.ReportMetric(mibps(raw.wall), "MiB/s_raw_sqlite")
	b.ReportMetric(mibps(file.wall), "MiB/s_file")
	b.ReportMetric(raw.wall.Seconds()/app.wall.Seconds(), "x_raw_sqlite")
	b.ReportMetric(raw.cpu.Seconds()/app.cpu.Seconds(), "x_raw_sqlite_cpu")
	b.ReportMetric(rawChunks.wall.Seconds()/app.wall.Seconds(), "x_raw_chunks")
	b.ReportMetric(rawChunks.cpu.Seconds()/app.cpu.Seconds(), "x_raw_chunks_cpu")
	b.ReportMetric(file.wall.Seconds()/app.wall.Seconds(), "x_file")
	b.ReportMetric(float64(app.walMax)/(1<<20), "MiB_wal_max")
}

// benchPiece is what a pipe read returns under a flood.
const benchPiece = 64 << 10

// cost is wall-clock and CPU time (user+system, the whole process).
type cost struct {
	wall, cpu time.Duration
	walMax    int64 // the largest the WAL file was seen, when measured
}

func (c *cost) add(d cost) { c.wall += d.wall; c.cpu += d.cpu; c.walMax = max(c.walMax, d.walMax) }

func measure(f func()) cost {
	cpu0, t0 := cpuTime(), time.Now()
	f()
	return cost{wall: time.Since(t0), cpu: cpuTime() - cpu0}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendStream writes size bytes of data through an Appender with the
// default options and a 64 MiB cap, until they are all in the database,
// and returns what that cost (opening the database is not counted).
func appendStream(b *testing.B, dir string, data []byte, size int64) cost {
	d, err := db.Open(context.Background(), filepath.Join(dir, "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const maxOutput = 64 << 20
	id := newJob(b, d, maxOutput)
	a := NewAppender(d, AppenderOptions{})
	a.Open()
	if err := a.Track(id, maxOutput); err != nil {
		b.Fatal(err)
	}
	// The WAL's size, sampled while the stream goes in: the checkpoints
	// must keep it bounded.
	stopWal, walMax := make(chan struct{}), make(chan int64)
	go func() {
		var m int64
		for {
			select {
			case <-stopWal:
				walMax <- m
				return
			case <-time.After(5 * time.Millisecond):
			}
			if fi, err := os.Stat(filepath.Join(dir, "jobs.db-wal")); err == nil {
				m = max(m, fi.Size())
			}
		}
	}()
	c := measure(func() {
		for n := int64(0); n < size; n += int64(len(data)) {
			if err := a.Write(id, Stdout, data); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
	})
	close(stopWal)
	c.walMax = <-walMax
	var evicted int64
	if err := d.QueryRow(`SELECT evicted_bytes FROM jobs WHERE id = ?`, id).Scan(&evicted); err != nil {
		b.Fatal(err)
	}
	if size > maxOutput && evicted == 0 {
		b.Fatal("nothing evicted")
	}
	return c
}

// insertRaw is the storage engine's own pace: the same bytes as 64 KiB rows
// of a table without indexes, 16 MiB per transaction, with the same
// connection settings.
func insertRaw(b *testing.B, dir string, data []byte, size int64) cost {
	raw, err := sql.Open("sqlite", db.DSN(filepath.Join(dir, "raw.db")))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TABLE raw (id INTEGER PRIMARY KEY, data BLOB NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	const txBytes = 16 << 20
	return measure(func() { insertRawRows(b, raw, data, size, txBytes) })
}

func insertRawRows(b *testing.B, raw *sql.DB, data []byte, size, txBytes int64) {
	for n := int64(0); n < size; {
		tx, err := raw.Begin()
		if err != nil {
			b.Fatal(err)
		}
		st, err := tx.Prepare(`INSERT INTO raw (data) VALUES (?)`)
		if err != nil {
			b.Fatal(err)
		}
		for end := n + txBytes; n < end && n < size; n += int64(len(data)) {
			if _, err := st.Exec(data); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// insertRawChunks inserts the same bytes as rows of the real chunks table
// (with its three indexes) in 16 MiB transactions, without the appender's
// bookkeeping, line counting or eviction: it tells the schema's cost from
// the appender's.
func insertRawChunks(b *testing.B, dir string, data []byte, size int64) cost {
	d, err := db.Open(context.Background(), filepath.Join(dir, "rawchunks.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	// A baseline checkpoints as SQLite does by default, on the committing
	// connection, one connection only.
	d.SetMaxOpenConns(1)
	if _, err := d.Exec(`PRAGMA wal_autocheckpoint = 1000`); err != nil {
		b.Fatal(err)
	}
	id := newJob(b, d, 0)
	at := db.FormatTime(time.Now())
	return measure(func() {
		var seq int64
		for n := int64(0); n < size; {
			tx, err := d.Begin()
			if err != nil {
				b.Fatal(err)
			}
			st, err := tx.Prepare(insertChunk)
			if err != nil {
				b.Fatal(err)
			}
			for end := n + 16<<20; n < end && n < size; n += int64(len(data)) {
				if _, err := st.Exec(id, seq, "stdout", n, seq, 0, at, data); err != nil {
					b.Fatal(err)
				}
				seq++
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// appendFile appends the same bytes to a plain file (no fsync).
func appendFile(b *testing.B, dir string, data []byte, size int64) cost {
	f, err := os.Create(filepath.Join(dir, "plain.log"))
	if err != nil {
		b.Fatal(err)
	}
	return measure(func() {
		for n := int64(0); n < size; n += int64(len(data)) {
			if _, err := f.Write(data); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// logFixture is a database holding one big uncapped log, shared by the read
// benchmarks of one run.
type logFixture struct {
	d        *db.DB
	id       string
	size     int64
	lines    int64
	buildDur time.Duration
}

var (
	fixtureMu  sync.Mutex
	fixtures   = map[int64]*logFixture{}
	fixtureDir string
)

func bigLog(b *testing.B) *logFixture {
	b.Helper()
	size := benchSize(b, "JOBS_BENCH_LOG_MIB", 64<<20, 1<<30)
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if f := fixtures[size]; f != nil {
		return f
	}
	if fixtureDir == "" {
		dir, err := os.MkdirTemp("", "jobs-logs-bench-")
		if err != nil {
			b.Fatal(err)
		}
		fixtureDir = dir
	}
	d, err := db.Open(context.Background(), filepath.Join(fixtureDir, fmt.Sprintf("log%d.db", size)))
	if err != nil {
		b.Fatal(err)
	}
	id := newJob(b, d, 0)
	a := NewAppender(d, AppenderOptions{})
	a.Open()
	if err := a.Track(id, 0); err != nil {
		b.Fatal(err)
	}
	data := benchData(64 << 10)
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(data)) {
		if err := a.Write(id, Stdout, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		b.Fatal(err)
	}
	f := &logFixture{d: d, id: id, size: size, buildDur: time.Since(start)}
	if err := d.QueryRow(`SELECT output_lines FROM jobs WHERE id = ?`, id).Scan(&f.lines); err != nil {
		b.Fatal(err)
	}
	fixtures[size] = f
	return f
}

// TestMain removes the read benchmarks' shared database.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range fixtures {
		f.d.Close()
	}
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// BenchmarkReadPageDeep reads a 64 KiB page at the end of a big log and at
// its start, alternately, and reports the ratio of their costs
// (x_deep_vs_start, target <= 1.5); the same for 100 lines read by line
// number (x_lines_deep_vs_start).
func BenchmarkReadPageDeep(b *testing.B) {
	f := bigLog(b)
	ctx := context.Background()
	const page = 64 << 10
	var startDur, deepDur, lineStartDur, lineDeepDur time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p, err := ReadRange(ctx, f.d, f.id, 0, page, Filter{})
		t1 := time.Now()
		q, err2 := ReadRange(ctx, f.d, f.id, f.size-page-12345, page, Filter{})
		t2 := time.Now()
		l, err3 := ReadLines(ctx, f.d, f.id, 0, 100, Filter{})
		t3 := time.Now()
		m, err4 := ReadLines(ctx, f.d, f.id, f.lines-200, 100, Filter{})
		t4 := time.Now()
		if err := firstErr(err, err2, err3, err4); err != nil {
			b.Fatal(err)
		}
		if len(p.Data) != page || len(q.Data) != page || l.Lines != 100 || m.Lines != 100 {
			b.Fatalf("short reads: %d, %d bytes, %d, %d lines", len(p.Data), len(q.Data), l.Lines, m.Lines)
		}
		startDur += t1.Sub(t0)
		deepDur += t2.Sub(t1)
		lineStartDur += t3.Sub(t2)
		lineDeepDur += t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(startDur.Microseconds())/n, "µs_start")
	b.ReportMetric(float64(deepDur.Microseconds())/n, "µs_deep")
	b.ReportMetric(deepDur.Seconds()/startDur.Seconds(), "x_deep_vs_start")
	b.ReportMetric(lineDeepDur.Seconds()/lineStartDur.Seconds(), "x_lines_deep_vs_start")
	b.ReportMetric(float64(f.size>>20), "MiB_log")
}

// BenchmarkTail500 takes the last 500 characters of a big log (target: under
// 1 ms) and compares it with the cheapest possible query for them, the last
// chunk's data by index (x_vs_last_chunk).
func BenchmarkTail500(b *testing.B) {
	f := bigLog(b)
	ctx := context.Background()
	var tailDur, rawDur time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p, err := Tail(ctx, f.d, f.id, 500, Chars, Filter{})
		t1 := time.Now()
		var last []byte
		err2 := f.d.QueryRowContext(ctx, `SELECT data FROM chunks WHERE job_id = ? ORDER BY byte_offset DESC LIMIT 1`, f.id).Scan(&last)
		t2 := time.Now()
		if err := firstErr(err, err2); err != nil {
			b.Fatal(err)
		}
		if len(p.Data) != 500 || p.End != f.size {
			b.Fatalf("tail: %d bytes ending at %d", len(p.Data), p.End)
		}
		tailDur += t1.Sub(t0)
		rawDur += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tailDur.Microseconds())/n, "µs_tail")
	b.ReportMetric(tailDur.Seconds()/rawDur.Seconds(), "x_vs_last_chunk")
	b.ReportMetric(float64(f.size>>20), "MiB_log")
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkTrickle100Jobs is one flush of the many-jobs workload (100 jobs,
// each printing 100 short lines a second): every job has a few lines
// queued, and one Flush writes them all. It reports the CPU one flush costs
// (µs_cpu_flush) against a baseline measured in the same run: the same
// rows inserted raw into a table without indexes in one transaction
// (x_raw_cpu = raw CPU / appender CPU; 1 would be the storage engine's own
// pace).
func BenchmarkTrickle100Jobs(b *testing.B) {
	const jobs, linesPerFlush = 100, 5
	var piece []byte
	for i := 0; i < linesPerFlush; i++ {
		piece = fmt.Appendf(piece, "j%03d %06d\n", i, i)
	}
	dir := b.TempDir()
	d, err := db.Open(context.Background(), filepath.Join(dir, "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	a := NewAppender(d, AppenderOptions{})
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = newJob(b, d, 64<<20)
		if err := a.Track(ids[i], 64<<20); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := sql.Open("sqlite", db.DSN(filepath.Join(dir, "raw.db")))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TABLE raw (id INTEGER PRIMARY KEY, job INTEGER NOT NULL, data BLOB NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	var app, base cost
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		app.add(measure(func() {
			for _, id := range ids {
				if err := a.Write(id, Stdout, piece); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.flush(); err != nil { // the flusher's flush, rows advanced when due
				b.Fatal(err)
			}
		}))
		base.add(measure(func() {
			tx, err := raw.Begin()
			if err != nil {
				b.Fatal(err)
			}
			st, err := tx.Prepare(`INSERT INTO raw (job, data) VALUES (?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			for j := range ids {
				if _, err := st.Exec(j, piece); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.StopTimer()
	if err := a.Close(); err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64(app.cpu.Microseconds())/n, "µs_cpu_flush")
	b.ReportMetric(float64(base.cpu.Microseconds())/n, "µs_cpu_raw")
	b.ReportMetric(base.cpu.Seconds()/app.cpu.Seconds(), "x_raw_cpu")
}
