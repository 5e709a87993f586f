package logs

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testwait"
	"golang.org/x/sys/unix"
)

// openDB opens a fresh database in t.TempDir().
func openDB(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var jobCounter atomic.Int64

// newJob inserts a jobs row with raw SQL, so these tests do not depend on
// the rest of internal/db.
func newJob(t testing.TB, d *db.DB, maxOutput int64) string {
	t.Helper()
	id := fmt.Sprintf("job%010d", jobCounter.Add(1))
	now := db.FormatTime(time.Now())
	_, err := d.Exec(`INSERT INTO jobs (id, scope, command, argv, cwd, created_at, last_access_at, max_output)
		VALUES (?, 'default', 'test', '[]', '/', ?, ?, ?)`, id, now, now, maxOutput)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newAppender returns an opened appender tracking jobs, closed at cleanup.
func newAppender(t testing.TB, d *db.DB, o AppenderOptions) *Appender {
	t.Helper()
	a := NewAppender(d, o)
	a.Open()
	t.Cleanup(func() { a.Close() })
	return a
}

func track(t testing.TB, a *Appender, id string, maxOutput int64) {
	t.Helper()
	if err := a.Track(id, maxOutput); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, a *Appender, id string, s Stream, p []byte) {
	t.Helper()
	if err := a.Write(id, s, p); err != nil {
		t.Fatal(err)
	}
}

func flush(t testing.TB, a *Appender) {
	t.Helper()
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, timeout, what, cond)
}

// jobRow is the output columns of a jobs row.
type jobRow struct {
	Output, Lines, Evicted, Dropped int64
	LastOutput                      *string
}

func readJobRow(t testing.TB, d *db.DB, id string) jobRow {
	t.Helper()
	var r jobRow
	err := d.QueryRow(`SELECT output_bytes, output_lines, evicted_bytes, dropped_bytes, last_output_at
		FROM jobs WHERE id = ?`, id).Scan(&r.Output, &r.Lines, &r.Evicted, &r.Dropped, &r.LastOutput)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// storedChunk is a chunks row.
type storedChunk struct {
	Seq                       int64
	Stream                    Stream
	Off, FirstLine, LineCount int64
	At                        string
	Data                      []byte // as written: decoded when stored compressed
	Packed                    bool   // stored compressed
	External                  bool   // stored in the output data file
}

func readChunks(t testing.TB, d *db.DB, id string) []storedChunk {
	t.Helper()
	rows, err := d.Query(`SELECT seq, stream, byte_offset, first_line, line_count, at, data, size, data_ref
		FROM chunks WHERE job_id = ? ORDER BY byte_offset`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cs []storedChunk
	for rows.Next() {
		var c storedChunk
		var size, ref sql.NullInt64
		if err := rows.Scan(&c.Seq, &c.Stream, &c.Off, &c.FirstLine, &c.LineCount, &c.At, &c.Data, &size, &ref); err != nil {
			t.Fatal(err)
		}
		switch {
		case ref.Valid:
			// Its bytes are in the output data file, read here by its
			// own query, as the sqlite3 shell would.
			o, err := d.Output(context.Background(), false)
			if err != nil {
				t.Fatalf("chunk at %d: %v", c.Off, err)
			}
			if err := o.QueryRow(`SELECT data FROM chunk_data WHERE id = ? AND job_id = ?`, ref.Int64, id).Scan(&c.Data); err != nil {
				t.Fatalf("chunk at %d, output data row %d: %v", c.Off, ref.Int64, err)
			}
			if int64(len(c.Data)) != size.Int64 {
				t.Fatalf("chunk at %d: %d bytes in the output data file, its row says %d", c.Off, len(c.Data), size.Int64)
			}
			c.External = true
		case size.Valid:
			data, err := decodeChunk(nil, c.Data, size.Int64)
			if err != nil {
				t.Fatalf("chunk at %d: %v", c.Off, err)
			}
			c.Data, c.Packed = data, true
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cs
}

// model is what was written to one job.
type model struct {
	data    []byte
	streams []Stream // stream of each byte
}

func (m *model) write(s Stream, p []byte) {
	m.data = append(m.data, p...)
	for range p {
		m.streams = append(m.streams, s)
	}
}

// checkChunks verifies the chunks of id against what was written: every
// stored byte is the byte written at its offset, of its stream, with the
// right line numbers; it returns the chunks.
func checkChunks(t testing.TB, d *db.DB, id string, m *model, maxChunk int) []storedChunk {
	t.Helper()
	cs := readChunks(t, d, id)
	var prevEnd, prevSeq int64 = 0, -1
	for _, c := range cs {
		end := c.Off + int64(len(c.Data))
		if c.Off < prevEnd || c.Seq <= prevSeq {
			t.Fatalf("chunk seq %d at %d overlaps or is out of order (previous end %d, seq %d)", c.Seq, c.Off, prevEnd, prevSeq)
		}
		if len(c.Data) == 0 || len(c.Data) > maxChunk {
			t.Fatalf("chunk seq %d has %d bytes (max %d)", c.Seq, len(c.Data), maxChunk)
		}
		if end > int64(len(m.data)) || !bytes.Equal(c.Data, m.data[c.Off:end]) {
			t.Fatalf("chunk seq %d at %d does not hold the bytes written there", c.Seq, c.Off)
		}
		for i := c.Off; i < end; i++ {
			if m.streams[i] != c.Stream {
				t.Fatalf("chunk seq %d (%s) holds a byte of %s at %d", c.Seq, c.Stream, m.streams[i], i)
			}
		}
		if got, want := c.FirstLine, int64(bytes.Count(m.data[:c.Off], newline)); got != want {
			t.Fatalf("chunk seq %d first_line = %d, want %d", c.Seq, got, want)
		}
		if got, want := c.LineCount, int64(bytes.Count(c.Data, newline)); got != want {
			t.Fatalf("chunk seq %d line_count = %d, want %d", c.Seq, got, want)
		}
		prevEnd, prevSeq = end, c.Seq
	}
	return cs
}

// storedBytes concatenates the chunks, optionally of one stream only.
func storedBytes(cs []storedChunk, only Stream) []byte {
	var b []byte
	for _, c := range cs {
		if only == "" || c.Stream == only {
			b = append(b, c.Data...)
		}
	}
	return b
}

// readAll pages through the whole output with ReadRange and checks that
// the pages join up.
func readAll(t testing.TB, d *db.DB, id string, limit int64, f Filter) (data []byte, gap int64, pages int) {
	t.Helper()
	var off int64
	for {
		p, err := ReadRange(context.Background(), d, id, off, limit, f)
		if err != nil {
			t.Fatal(err)
		}
		if p.Start != off && !(off > p.TotalBytes && p.Start == p.TotalBytes) {
			t.Fatalf("page at %d starts at %d", off, p.Start)
		}
		if f.Grep == nil && f.Stream == "" && int64(len(p.Data))+p.Gap != p.End-p.Start {
			t.Fatalf("page [%d,%d) has %d bytes and a gap of %d", p.Start, p.End, len(p.Data), p.Gap)
		}
		data = append(data, p.Data...)
		gap += p.Gap
		pages++
		if !p.More {
			return data, gap, pages
		}
		if p.NextOffset <= off && len(p.Data) == 0 {
			t.Fatalf("read at %d made no progress: %+v", off, p)
		}
		off = p.NextOffset
	}
}

// plantChunkAtZero inserts a stray chunk row where the appender's first
// chunk of id goes, so that writing that chunk breaks the schema's
// uniqueness rule.
func plantChunkAtZero(t testing.TB, d *db.DB, id string) {
	t.Helper()
	if _, err := d.Exec(`INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
		VALUES (?, 99, 'stdout', 0, 0, 0, '2026-01-01T00:00:00.000Z', x'00')`, id); err != nil {
		t.Fatal(err)
	}
}

// fileSize is the size of the file at path, 0 when it is missing.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// freeBytes returns the space available on the file system of path.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// writeCapped writes data for job id in writes of piece bytes, with a
// flush after each (so that the job's cap of maxOutput is enforced many
// times), and checks that a read gives the first head bytes and the
// newest rest exactly, with the evicted middle as the gap.
func writeCapped(t testing.TB, d *db.DB, a *Appender, id string, data []byte, piece int, head, maxOutput int64) {
	t.Helper()
	for p := data; len(p) > 0; {
		n := min(len(p), piece)
		write(t, a, id, Stdout, p[:n])
		p = p[n:]
		flush(t, a)
	}
	got, gap, _ := readAll(t, d, id, 1<<20, Filter{})
	evicted := int64(len(data)) - maxOutput
	want := append(bytes.Clone(data[:head]), data[head+evicted:]...)
	if gap != evicted || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes with a gap of %d, want %d with a gap of %d (equal %v)", len(got), gap, len(want), evicted, bytes.Equal(got, want))
	}
}
