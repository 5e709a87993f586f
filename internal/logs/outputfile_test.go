package logs

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
)

// outputDataRows counts the rows of the output data file of d, and those
// of job id.
func outputDataRows(t *testing.T, d *db.DB, id string) (all, job int64) {
	t.Helper()
	o, err := d.Output(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.QueryRow(`SELECT count(*), count(*) FILTER (WHERE job_id = ?) FROM chunk_data`, id).Scan(&all, &job); err != nil {
		t.Fatal(err)
	}
	return all, job
}

// externalChunks counts job id's chunk rows whose bytes are in the output
// data file.
func externalChunks(t *testing.T, d *db.DB, id string) int64 {
	t.Helper()
	var n int64
	if err := d.QueryRow(`SELECT count(*) FROM chunks WHERE job_id = ? AND data_ref IS NOT NULL`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// floodOutputFile writes n random bytes to a job through an appender on
// a new database and flushes them, and returns the bytes and how many of
// the job's chunks have them in the output data file (at least one).
func floodOutputFile(t *testing.T, n int) (d *db.DB, a *Appender, id string, data []byte, ext int64) {
	t.Helper()
	d = openDB(t)
	a = newAppender(t, d, AppenderOptions{})
	id = newJob(t, d, 0)
	track(t, a, id, 0)
	data = randomOutput(t, n)
	write(t, a, id, Stdout, data)
	flush(t, a)
	if ext = externalChunks(t, d, id); ext == 0 {
		t.Fatal("no chunk's bytes are in the output data file")
	}
	return d, a, id, data, ext
}

// TestCapFreesOutputData: a capped flood of random bytes, whose chunks'
// bytes go to the output data file, is evicted down to its cap flush after
// flush; the bytes of every evicted chunk leave that file with it (the
// file holds exactly the rows its chunks name), the chunk trimmed at the
// edge of the gap keeps its rest, and a read gives the head and the tail
// exactly.
func TestCapFreesOutputData(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{HeadKeep: 64 << 10})
	const maxOutput = 512 << 10
	id := newJob(t, d, maxOutput)
	track(t, a, id, maxOutput)
	writeCapped(t, d, a, id, randomOutput(t, testlong.Pick(3<<20, 12<<20)+12345), 200000, 64<<10, maxOutput)
	ext := externalChunks(t, d, id)
	all, mine := outputDataRows(t, d, id)
	if ext == 0 || all != ext || mine != ext {
		t.Fatalf("%d chunks name the output data file, which holds %d rows (%d of the job): want one row per chunk", ext, all, mine)
	}
}

// TestSweepOutputData: the bytes of a removed job's chunks, and bytes no
// chunk ever named (what a crash between the output data file's commit
// and the database's leaves), are swept; those of a job still there are
// not, and read back exactly.
func TestSweepOutputData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	keep, gone := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, keep, 0)
	track(t, a, gone, 0)
	kept := randomOutput(t, 1<<20+777)
	write(t, a, keep, Stdout, kept)
	write(t, a, gone, Stdout, randomOutput(t, 1<<20))
	flush(t, a)
	o, err := d.Output(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Exec(`INSERT INTO chunk_data (id, job_id, data) VALUES (1000000, ?, x'00')`, keep); err != nil {
		t.Fatal(err)
	}
	ext := externalChunks(t, d, keep)
	all, _ := outputDataRows(t, d, keep)
	_, goneRows := outputDataRows(t, d, gone)
	if ext == 0 || goneRows == 0 {
		t.Fatalf("%d and %d chunks in the output data file, want both floods there", ext, goneRows)
	}
	if _, err := d.Exec(`DELETE FROM jobs WHERE id = ?`, gone); err != nil { // its chunks go with it
		t.Fatal(err)
	}
	n, err := d.SweepOutputData(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != goneRows+1 {
		t.Fatalf("swept %d rows, want the removed job's %d and the one no chunk named", n, goneRows)
	}
	if after, mine := outputDataRows(t, d, keep); after != all-goneRows-1 || mine != ext {
		t.Fatalf("after the sweep %d rows (%d of the kept job), want %d", after, mine, ext)
	}
	got, gap, _ := readAll(t, d, keep, 1<<20, Filter{})
	if gap != 0 || !bytes.Equal(got, kept) {
		t.Fatalf("read %d bytes (gap %d) of the kept job, want its %d", len(got), gap, len(kept))
	}
	if n, err := d.SweepOutputData(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v; want nothing to do", n, err)
	}
}

// TestOutputDataFileMissing: a database whose output data file is gone (a
// copy made without it) reads the chunks it holds itself, and fails a read
// that needs the missing file's bytes with an error that names it.
func TestOutputDataFileMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("first line\n"))
	flush(t, a)
	write(t, a, id, Stdout, randomOutput(t, 256<<10))
	flush(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	path := d.Path
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(db.OutputPath(path) + suf); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	d2, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	p, err := ReadRange(ctx, d2, id, 0, 11, Filter{})
	if err != nil || string(p.Data) != "first line\n" {
		t.Fatalf("read of the bytes the database holds: %q, %v", p.Data, err)
	}
	_, err = ReadRange(ctx, d2, id, 0, 1<<20, Filter{})
	if !errors.Is(err, db.ErrOutputDataGone) {
		t.Fatalf("read of the missing bytes: %v, want ErrOutputDataGone", err)
	}
	if _, err := os.Stat(db.OutputPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the read created the missing output data file: %v", err)
	}
}

// TestDamagedOutputFileFallsBack: an output data file that cannot be
// written (its header or its table's root page overwritten) costs no
// output: the flood after the damage is stored in the database, read back
// exactly, the appender says so once, and the damaged file is left as it
// was.
func TestDamagedOutputFileFallsBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		root bool // the table's root page overwritten, else the file's first page
	}{{"header", false}, {"root page of chunk_data", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "jobs.db")
			d, err := db.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			a := NewAppender(d, AppenderOptions{})
			a.Open()
			first := newJob(t, d, 0)
			track(t, a, first, 0)
			write(t, a, first, Stdout, randomOutput(t, 256<<10))
			flush(t, a)
			if externalChunks(t, d, first) == 0 {
				t.Fatal("the flood before the damage is not in the output data file")
			}
			page := int64(1)
			if c.root {
				o, err := d.Output(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				if err := o.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'chunk_data'`).Scan(&page); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			out := db.OutputPath(path)
			if _, err := os.Stat(out + "-wal"); err == nil {
				t.Fatal("the output data file's WAL is still there after its last connection closed")
			}
			f, err := os.OpenFile(out, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			junk := make([]byte, db.OutputPageSize)
			for i := range junk {
				junk[i] = byte(i*131 + 7)
			}
			if _, err := f.WriteAt(junk, (page-1)*db.OutputPageSize); err != nil {
				t.Fatal(err)
			}
			f.Close()
			before, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}

			d2, err := db.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d2.Close() }) // after the appender's close, registered later
			var said []error
			a2 := newAppender(t, d2, AppenderOptions{OnOutputFileError: func(err error) { said = append(said, err) }})
			id := newJob(t, d2, 0)
			track(t, a2, id, 0)
			var want []byte
			for range 3 {
				p := randomOutput(t, 200<<10+3)
				want = append(want, p...)
				write(t, a2, id, Stdout, p)
				flush(t, a2)
			}
			got, gap, _ := readAll(t, d2, id, 1<<20, Filter{})
			if gap != 0 || !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes (gap %d) of the flood after the damage, want its %d", len(got), gap, len(want))
			}
			if n := externalChunks(t, d2, id); n != 0 {
				t.Errorf("%d chunks of the flood after the damage name the damaged file", n)
			}
			if len(said) != 1 {
				t.Errorf("the appender said %d times that the output data file failed (%v), want once", len(said), said)
			}
			if after, err := os.ReadFile(out); err != nil || !bytes.Equal(after, before) {
				t.Errorf("the damaged output data file was changed (%v)", err)
			}
		})
	}
}

// TestOutputDataFileHasAWAL: a flood of random bytes larger than one
// transaction there (outTxBytes) lands in the output data file, a WAL
// database (db.OutputDSN) whose checkpoints the appender runs: once it
// closes, the file itself holds the bytes, read back exactly.
func TestOutputDataFileHasAWAL(t *testing.T) {
	t.Parallel()
	d, a, id, data, _ := floodOutputFile(t, 2*outTxBytes+12345)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, gap, _ := readAll(t, d, id, 1<<20, Filter{})
	if gap != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes with a gap of %d, want the %d written", len(got), gap, len(data))
	}
	out := db.OutputPath(d.Path)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 20)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	// Bytes 18 and 19 of the header are the file format's write and read
	// versions: 1 for a rollback journal, 2 for WAL.
	if head[18] != 2 || head[19] != 2 {
		t.Fatalf("the output data file's header gives format versions %d and %d, want 2 (WAL)", head[18], head[19])
	}
	if fi, err := f.Stat(); err != nil || fi.Size() < int64(len(data)) {
		t.Fatalf("after the appender closed, the output data file holds %d bytes (%v): its WAL was not copied into it", fi.Size(), err)
	}
}

// TestNoOutputDataFileWithoutCheckpoints: with checkpoints left to
// another process (Litestream, which replicates WAL databases only), a
// flood of random bytes stays in the database: no output data file.
func TestNoOutputDataFileWithoutCheckpoints(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{NoCheckpoints: true})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	data := randomOutput(t, 1<<20)
	write(t, a, id, Stdout, data)
	flush(t, a)
	got, gap, _ := readAll(t, d, id, 1<<20, Filter{})
	if gap != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes with a gap of %d, want the %d written", len(got), gap, len(data))
	}
	if ext := externalChunks(t, d, id); ext != 0 {
		t.Fatalf("%d chunks name the output data file", ext)
	}
	if _, err := os.Stat(db.OutputPath(d.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an output data file was made (%v)", err)
	}
}

// TestHeldReadKeepsItsBytes: a read that holds the output data file (what
// again's second try does) reads every byte of its snapshot though, between
// its chunk rows and their bytes, the job's output is cleared and the sweep
// deletes those bytes. Not parallel: it sets beforeOutputData.
func TestHeldReadKeepsItsBytes(t *testing.T) {
	ctx := context.Background()
	d, _, id, want, ext := floodOutputFile(t, 1<<20+333)
	var (
		once  sync.Once
		swept = make(chan struct{})
		n     int64
		err   error
	)
	beforeOutputData = func(bool) {
		once.Do(func() {
			if err := Clear(ctx, d, id); err != nil {
				t.Error(err)
				close(swept)
				return
			}
			go func() {
				defer close(swept)
				n, err = d.SweepOutputData(ctx)
			}()
			select {
			case <-swept:
			case <-time.After(time.Minute):
				t.Error("the sweep did not end")
			}
		})
	}
	defer func() { beforeOutputData = nil }()
	p, rerr := ReadRange(context.WithValue(ctx, holdOutputKey{}, true), d, id, 0, 2<<20, Filter{})
	if rerr != nil || !bytes.Equal(p.Data, want) {
		t.Fatalf("held read: %d bytes, %v; want the %d bytes of its snapshot", len(p.Data), rerr, len(want))
	}
	if err != nil || n != ext {
		t.Fatalf("the sweep during the read: %d rows, %v; want the cleared job's %d", n, err, ext)
	}
}

// TestHeldReadFindsNewerBytes: a read that holds the output data file
// reads the bytes of the chunks committed between its hold and its
// snapshot of the database, which its hold's snapshot does not have: a
// poll of a job flooding random bytes under a cap failed with "the
// chunk's bytes are not in the output data file" when its held try met
// the newest chunk. Not parallel: it sets betweenSnapshots.
func TestHeldReadFindsNewerBytes(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	first, newer := randomOutput(t, 1<<20), randomOutput(t, 1<<20+77)
	write(t, a, id, Stdout, first)
	flush(t, a)
	betweenSnapshots = func() {
		write(t, a, id, Stdout, newer)
		flush(t, a)
	}
	defer func() { betweenSnapshots = nil }()
	p, err := ReadRange(context.WithValue(ctx, holdOutputKey{}, true), d, id, 0, 64<<20, Filter{})
	want := append(first, newer...)
	if err != nil || !bytes.Equal(p.Data, want) {
		t.Fatalf("held read: %d bytes, %v; want the %d stored before its snapshot of the database", len(p.Data), err, len(want))
	}
}

// TestOutputFileBytesSkipTheWAL: the output a flush stored in the output
// data file is not counted as written to the database's WAL, which wakes
// checkpoints and starts the WAL over by that count (db.Upkeep): a flood of
// random bytes woke a checkpoint every 4 MiB, and the writer checkpointed
// itself every 32 MiB, for bytes that never went to the WAL.
func TestOutputFileBytesSkipTheWAL(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	random := randomOutput(t, 3<<20)
	text := bytes.Repeat([]byte("a line of a build log, compiled and linked\n"), 24000)
	write(t, a, id, Stdout, random)
	write(t, a, id, Stdout, text)
	flush(t, a)
	var ext int64
	if err := d.QueryRow(`SELECT coalesce(sum(size), 0) FROM chunks WHERE job_id = ? AND data_ref IS NOT NULL`, id).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	if ext == 0 {
		t.Fatal("no chunk in the output data file")
	}
	total := int64(len(random) + len(text))
	if got := a.up.WALBytes(); got != total-ext {
		t.Fatalf("the writer counted %d bytes into the WAL, want the %d of %d not in the output data file", got, total-ext, total)
	}
}

// TestReadsPassAStoppedWrite (row B21 of the reliability matrix): while a
// writer of the output data file is stopped in the middle of a write (a
// supervisor frozen with SIGSTOP mid-commit, here a connection that holds
// the file's write lock and does not let go), reads of the bytes already
// committed there answer, through the open database and through one
// opened afterwards as a new command's is.
func TestReadsPassAStoppedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _, id, want, _ := floodOutputFile(t, 1<<20+99)
	raw, err := sql.Open("sqlite", db.OutputDSN(db.OutputPath(d.Path)))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stopped, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stopped.Close()
	if _, err := stopped.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := stopped.ExecContext(ctx, `INSERT INTO chunk_data (id, job_id, data) VALUES (1000000, 'x', randomblob(200000))`); err != nil {
		t.Fatal(err)
	}
	defer stopped.ExecContext(ctx, "ROLLBACK")
	d2, err := db.Open(ctx, d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for name, rd := range map[string]*db.DB{"the open database": d, "a new open": d2} {
		p, err := ReadRange(ctx, rd, id, 0, 2<<20, Filter{})
		if err != nil || !bytes.Equal(p.Data, want) {
			t.Errorf("read through %s while a write is stopped: %d bytes, %v; want the %d committed", name, len(p.Data), err, len(want))
		}
	}
}
