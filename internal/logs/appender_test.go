package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
	"github.com/agentjobs/jobs/internal/vocab"
)

func TestRoundTripBinary(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 7})
	id := newJob(t, d, 0)
	track(t, a, id, 0)

	var m model
	writes := [][]byte{
		{0, 0, 0},
		[]byte("\xff\xfe invalid \xc3\x28 utf-8 \xe2\x82\n"),
		[]byte("héllo wörld €\n"),
		{0x80, 0x81, '\n', 0, '\n'},
		[]byte("no newline at the end \x00"),
	}
	for i, w := range writes {
		s := Stdout
		if i%2 == 1 {
			s = Stderr
		}
		write(t, a, id, s, w)
		m.write(s, w)
	}
	flush(t, a)

	cs := checkChunks(t, d, id, &m, 7)
	if got := storedBytes(cs, ""); !bytes.Equal(got, m.data) {
		t.Fatalf("stored %q, want %q", got, m.data)
	}
	for _, limit := range []int64{0, 1, 3, 100} {
		got, gap, _ := readAll(t, d, id, limit, Filter{})
		if !bytes.Equal(got, m.data) || gap != 0 {
			t.Fatalf("limit %d: read %q (gap %d), want %q", limit, got, gap, m.data)
		}
	}
	row := readJobRow(t, d, id)
	if row.Output != int64(len(m.data)) || row.Lines != int64(bytes.Count(m.data, newline)) || row.LastOutput == nil {
		t.Fatalf("jobs row %+v, want %d bytes, %d lines, a last output time", row, len(m.data), bytes.Count(m.data, newline))
	}
}

func TestChunksNeverMixStreamsAndCoalesce(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{MaxChunk: 10}) // not opened: only Flush writes
	defer a.Close()
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	for _, w := range []struct {
		s Stream
		p string
	}{{Stdout, "ab"}, {Stdout, "cd"}, {Stderr, "E"}, {Stdout, "0123456789xyz"}} {
		write(t, a, id, w.s, []byte(w.p))
	}
	flush(t, a)
	var got []string
	for _, c := range readChunks(t, d, id) {
		got = append(got, fmt.Sprintf("%d:%s:%d:%s", c.Seq, c.Stream, c.Off, c.Data))
	}
	want := []string{"0:stdout:0:abcd", "1:stderr:4:E", "2:stdout:5:0123456789", "3:stdout:15:xyz"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("chunks %v, want %v", got, want)
	}
}

func TestTrickleIsVisibleWithoutFlush(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	start := time.Now()
	write(t, a, id, Stdout, []byte("hello\n"))
	waitFor(t, 30*time.Second, "the line to be readable", func() bool {
		p, err := ReadRange(context.Background(), d, id, 0, 0, Filter{})
		return err == nil && string(p.Data) == "hello\n"
	})
	t.Logf("visible after %v", time.Since(start))
}

// While a job runs, its jobs row's counters lag its output (they are
// advanced every RowEvery): every reader takes the end of the output from
// the newest chunk, and a terminal status, even one set by someone who
// never saw the output (lost), records the final counts.
func TestRowLagsReadersDoNot(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{RowEvery: time.Hour})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	ctx := context.Background()
	write(t, a, id, Stdout, []byte("one\n")) // the first output advances the row
	waitFor(t, 30*time.Second, "the row to count the first line", func() bool {
		return readJobRow(t, d, id).Output == 4
	})
	write(t, a, id, Stderr, []byte("two\n"))
	write(t, a, id, Stdout, []byte("three\n"))
	waitFor(t, 30*time.Second, "the lines to be readable", func() bool {
		p, err := ReadRange(ctx, d, id, 0, 0, Filter{})
		return err == nil && string(p.Data) == "one\ntwo\nthree\n"
	})
	if row := readJobRow(t, d, id); row.Output != 4 || row.Lines != 1 {
		t.Fatalf("row advanced before RowEvery: %+v", row)
	}
	j, err := d.FindJobByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	if err := d.QueryRow(`SELECT max(at) FROM chunks WHERE job_id = ?`, id).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if j.OutputBytes != 14 || j.OutputLines != 3 || j.LastOutputAt == nil || db.FormatTime(*j.LastOutputAt) != newest {
		t.Fatalf("job read while its row lags: %d bytes, %d lines, last output %v (newest chunk %s); want 14, 3",
			j.OutputBytes, j.OutputLines, j.LastOutputAt, newest)
	}
	p, err := Tail(ctx, d, id, 5, Chars, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalBytes != 14 || p.TotalLines != 3 || string(p.Data) != "hree\n" {
		t.Fatalf("tail while the row lags: %+v", p)
	}

	// A terminal status set without counts (as when a job is marked lost).
	if _, err := d.Transition(ctx, id, db.Transition{To: vocab.StatusFailed, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if row := readJobRow(t, d, id); row.Output != 14 || row.Lines != 3 || row.LastOutput == nil || *row.LastOutput != newest {
		t.Fatalf("row after the terminal status: %+v; want 14 bytes, 3 lines, last output %s", row, newest)
	}
}

// An appender that takes over a job whose row lags (its previous appender
// died between two advances) goes on at the end of the newest chunk.
func TestTrackResumesAtNewestChunk(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{RowEvery: time.Hour}) // not opened: flushes by hand
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	for _, p := range []string{"one\n", "two\n"} {
		write(t, a, id, Stdout, []byte(p))
		if err := a.flush(); err != nil { // the flusher's flush: the second does not advance the row
			t.Fatal(err)
		}
	}
	if row := readJobRow(t, d, id); row.Output != 4 {
		t.Fatalf("row after two flushes: %+v, want it at the first line", row)
	}
	b := newAppender(t, d, AppenderOptions{})
	track(t, b, id, 0)
	write(t, b, id, Stdout, []byte("three\n"))
	flush(t, b)
	got, gap, _ := readAll(t, d, id, 0, Filter{})
	if gap != 0 || string(got) != "one\ntwo\nthree\n" {
		t.Fatalf("read back %q (gap %d)", got, gap)
	}
	if row := readJobRow(t, d, id); row.Output != 14 || row.Lines != 3 {
		t.Fatalf("row: %+v, want 14 bytes, 3 lines", row)
	}
}

// A job that goes quiet has its row advanced once RowEvery has passed,
// without more output; Flush advances every row at once.
func TestRowCatchesUp(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{RowEvery: 200 * time.Millisecond})
	quiet, flushed := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, quiet, 0)
	track(t, a, flushed, 0)
	for _, id := range []string{quiet, flushed} {
		write(t, a, id, Stdout, []byte("a\n"))
	}
	waitFor(t, 30*time.Second, "the rows to count the first line", func() bool {
		return readJobRow(t, d, quiet).Output == 2 && readJobRow(t, d, flushed).Output == 2
	})
	write(t, a, quiet, Stdout, []byte("bb\n"))
	waitFor(t, 10*time.Second, "the quiet job's row to catch up", func() bool {
		return readJobRow(t, d, quiet).Output == 5
	})
	b := NewAppender(d, AppenderOptions{RowEvery: time.Hour})
	defer b.Close()
	track(t, b, flushed, 0)
	write(t, b, flushed, Stdout, []byte("ccc\n"))
	flush(t, b)
	if row := readJobRow(t, d, flushed); row.Output != 6 || row.Lines != 2 {
		t.Fatalf("row after Flush: %+v, want 6 bytes, 2 lines", row)
	}
}

func TestLinesSplitAcrossChunks(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 4})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	text := "first line\nsecond, much longer line\n\nfourth\nunterminated"
	for i := 0; i < len(text); i += 3 { // writes that cut lines anywhere
		write(t, a, id, Stdout, []byte(text[i:min(i+3, len(text))]))
	}
	flush(t, a)
	ctx := context.Background()
	lines := []string{"first line\n", "second, much longer line\n", "\n", "fourth\n", "unterminated"}
	for from := range lines {
		for n := 1; from+n <= len(lines); n++ {
			p, err := ReadLines(ctx, d, id, int64(from), int64(n), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for _, l := range lines[from : from+n] {
				want += l
			}
			if string(p.Data) != want || p.LinesBefore != int64(from) {
				t.Fatalf("ReadLines(%d, %d) = %q at line %d, want %q", from, n, p.Data, p.LinesBefore, want)
			}
		}
	}
	p, err := ReadLines(ctx, d, id, 1, 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p.Data), text[len(lines[0]):]; got != want || p.More || p.TotalLines != 4 {
		t.Fatalf("ReadLines(1, 0) = %q more=%v total lines %d, want %q", got, p.More, p.TotalLines, want)
	}
	p, err = ReadLines(ctx, d, id, 9, 2, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data) != 0 || p.Start != int64(len(text)) {
		t.Fatalf("ReadLines past the end = %+v", p)
	}
	p, err = TailLines(ctx, d, id, 2, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p.Data), "fourth\nunterminated"; got != want || p.LinesBefore != 3 || p.Lines != 1 {
		t.Fatalf("TailLines(2) = %q first line %d lines %d, want %q", got, p.LinesBefore, p.Lines, want)
	}
}

func TestStreamFilter(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 16})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	var m model
	for i := 0; i < 200; i++ {
		s, p := Stdout, fmt.Sprintf("out %d\n", i)
		if i%3 == 0 {
			s, p = Stderr, fmt.Sprintf("ERR %d", i) // stderr lines finish in the next stderr write
			if i%2 == 0 {
				p += "\n"
			}
		}
		write(t, a, id, s, []byte(p))
		m.write(s, []byte(p))
	}
	flush(t, a)
	cs := checkChunks(t, d, id, &m, 16)
	for _, s := range []Stream{Stdout, Stderr} {
		want := storedBytes(cs, s)
		for _, limit := range []int64{0, 5, 64} {
			got, _, _ := readAll(t, d, id, limit, Filter{Stream: s})
			if !bytes.Equal(got, want) {
				t.Fatalf("%s limit %d: read %q, want %q", s, limit, got, want)
			}
		}
		p, err := Tail(context.Background(), d, id, 20, Bytes, Filter{Stream: s})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Data, want[len(want)-20:]) {
			t.Fatalf("%s tail = %q, want %q", s, p.Data, want[len(want)-20:])
		}
	}
}

func TestEvictionKeepsHeadAndTail(t *testing.T) {
	d := openDB(t)
	const head, maxOutput, chunk = 4 << 10, 16 << 10, 1 << 10
	a := newAppender(t, d, AppenderOptions{MaxChunk: chunk, HeadKeep: head, MaxBatchBytes: 8 << 10})
	id := newJob(t, d, maxOutput)
	track(t, a, id, maxOutput)
	var m model
	for i := 0; m.data == nil || len(m.data) < 200<<10; i++ {
		p := []byte(fmt.Sprintf("line %06d %s\n", i, bytes.Repeat([]byte{'x'}, i%50)))
		write(t, a, id, Stdout, p)
		m.write(Stdout, p)
		if i%500 == 0 {
			flush(t, a)
		}
	}
	flush(t, a)
	cs := checkChunks(t, d, id, &m, chunk)
	stored := storedBytes(cs, "")
	row := readJobRow(t, d, id)
	total := int64(len(m.data))
	if row.Output != total || row.Evicted != total-int64(len(stored)) || row.Dropped != 0 {
		t.Fatalf("jobs row %+v: want %d bytes, %d evicted", row, total, total-int64(len(stored)))
	}
	if !bytes.Equal(stored[:head], m.data[:head]) || cs[0].Off != 0 {
		t.Fatalf("head not kept")
	}
	if len(stored) > maxOutput+chunk || len(stored) < maxOutput-chunk {
		t.Fatalf("retained %d bytes, cap %d", len(stored), maxOutput)
	}
	if !bytes.HasSuffix(m.data, stored[head:]) {
		t.Fatalf("tail is not the newest output")
	}

	ctx := context.Background()
	p, err := ReadRange(ctx, d, id, 0, MaxLimit, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Data, stored) || p.Gap != row.Evicted || p.EvictedBytes != row.Evicted || p.End != total || p.More {
		t.Fatalf("read across the gap: %d bytes, gap %d, end %d, more %v; want %d bytes, gap %d", len(p.Data), p.Gap, p.End, p.More, len(stored), row.Evicted)
	}
	// A read inside the gap starts at the first stored byte after it.
	mid := total / 2
	p, err = ReadRange(ctx, d, id, mid, 100, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	tailStart := total - int64(len(stored)-head)
	if p.Gap != tailStart-mid || !bytes.Equal(p.Data, m.data[tailStart:tailStart+100]) {
		t.Fatalf("read in the gap: gap %d, want %d; data %q", p.Gap, tailStart-mid, p.Data)
	}
	if want := int64(bytes.Count(m.data[:tailStart], newline)); p.LinesBefore != want {
		t.Fatalf("read in the gap: first line %d, want %d", p.LinesBefore, want)
	}
	p, err = Tail(ctx, d, id, 500, Chars, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Data, m.data[total-500:]) || p.Gap != 0 {
		t.Fatalf("tail after eviction = %q", p.Data)
	}
	// Lines evicted: the page starts at the first stored line after them.
	evictedLine := int64(bytes.Count(m.data[:head], newline)) + 10
	p, err = ReadLines(ctx, d, id, evictedLine, 1000000, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Start != tailStart || !bytes.Equal(p.Data, m.data[tailStart:]) {
		t.Fatalf("lines from the gap start at %d, want %d", p.Start, tailStart)
	}
}

func TestClear(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("before\n"))
	flush(t, a)
	ctx := context.Background()
	if err := Clear(ctx, d, id); err != nil {
		t.Fatal(err)
	}
	write(t, a, id, Stdout, []byte("after\n"))
	flush(t, a)
	p, err := ReadRange(ctx, d, id, 0, 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Data) != "after\n" || p.Gap != 7 || p.EvictedBytes != 7 || p.TotalBytes != 13 || p.LinesBefore != 1 {
		t.Fatalf("after clear: %+v", p)
	}
	if err := Clear(ctx, d, "nosuchjob"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("Clear of a missing job = %v", err)
	}
}

// The appender knows what a capped job retains only from above (a clear
// by another connection lowers it behind its back): after a clear, a job
// whose earlier output was far over its cap keeps all its new output up to
// the cap, and only then loses the middle again.
func TestCapAfterClear(t *testing.T) {
	d := openDB(t)
	const head, maxOutput = 4 << 10, 16 << 10
	a := newAppender(t, d, AppenderOptions{MaxChunk: 1 << 10, HeadKeep: head})
	id := newJob(t, d, maxOutput)
	track(t, a, id, maxOutput)
	line := []byte(strings.Repeat("y", 63) + "\n")
	for range 1024 { // 64 KiB: four times the cap
		write(t, a, id, Stdout, line)
	}
	flush(t, a)
	ctx := context.Background()
	if err := Clear(ctx, d, id); err != nil {
		t.Fatal(err)
	}
	var after []byte
	for i := range 200 { // 12.8 KiB: under the cap
		p := fmt.Appendf(nil, "after %03d %s\n", i, strings.Repeat("z", 53))
		write(t, a, id, Stdout, p)
		after = append(after, p...)
		if i%20 == 0 {
			flush(t, a)
		}
	}
	flush(t, a)
	got, _, _ := readAll(t, d, id, 64<<10, Filter{})
	if !bytes.Equal(got, after) {
		t.Fatalf("after clear: kept %d of the %d bytes written since, under a cap of %d", len(got), len(after), maxOutput)
	}
	for range 200 { // another 12.8 KiB: over the cap again
		write(t, a, id, Stdout, line)
	}
	flush(t, a)
	row := readJobRow(t, d, id)
	if kept := row.Output - row.Evicted - row.Dropped; kept > maxOutput+1<<10 || kept < maxOutput-1<<10 {
		t.Fatalf("retained %d bytes, cap %d", kept, maxOutput)
	}
}

func TestResumeAfterReopen(t *testing.T) {
	d := openDB(t)
	id := newJob(t, d, 0)
	a := NewAppender(d, AppenderOptions{MaxChunk: 8})
	a.Open()
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("one\ntwo\nthree"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d2, err := db.Open(context.Background(), d.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() }) // after the appender's close, registered later
	b := newAppender(t, d2, AppenderOptions{MaxChunk: 8})
	track(t, b, id, 0)
	write(t, b, id, Stderr, []byte("\nfour\n"))
	flush(t, b)
	m := model{}
	m.write(Stdout, []byte("one\ntwo\nthree"))
	m.write(Stderr, []byte("\nfour\n"))
	cs := checkChunks(t, d2, id, &m, 8)
	if got := storedBytes(cs, ""); !bytes.Equal(got, m.data) {
		t.Fatalf("after resume: %q", got)
	}
	if row := readJobRow(t, d2, id); row.Output != int64(len(m.data)) || row.Lines != 4 {
		t.Fatalf("after resume: %+v", row)
	}
}

func TestTrackMissingJobAndWriteUntracked(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	if err := a.Track("nosuchjob", 0); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("Track = %v", err)
	}
	if err := a.Write("nosuchjob", Stdout, []byte("x")); !errors.Is(err, ErrNotTracked) {
		t.Fatalf("Write = %v", err)
	}
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	if err := a.Write(id, "stdin", []byte("x")); err == nil {
		t.Fatal("Write to an invalid stream succeeded")
	}
	if err := a.Untrack(id); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(id, Stdout, []byte("x")); !errors.Is(err, ErrNotTracked) {
		t.Fatalf("Write after Untrack = %v", err)
	}
}

func TestDeletedJobDoesNotSpoilTheBatch(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{})
	defer a.Close()
	gone, kept := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, gone, 0)
	track(t, a, kept, 0)
	if _, err := d.Exec(`DELETE FROM jobs WHERE id = ?`, gone); err != nil {
		t.Fatal(err)
	}
	write(t, a, gone, Stdout, []byte("lost\n"))
	write(t, a, kept, Stdout, []byte("kept\n"))
	flush(t, a)
	write(t, a, gone, Stdout, []byte("discarded\n"))
	flush(t, a)
	if got := storedBytes(readChunks(t, d, kept), ""); string(got) != "kept\n" {
		t.Fatalf("kept job: %q", got)
	}
}

// A job removed while its row lags is found out by its chunks, not by an
// UPDATE of its row, and still spoils nothing for the others.
func TestDeletedJobBetweenRowAdvances(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{RowEvery: time.Hour}) // not opened: flushes by hand
	defer a.Close()
	gone, kept := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, gone, 0)
	track(t, a, kept, 0)
	step := func(g, k string) {
		t.Helper()
		write(t, a, gone, Stdout, []byte(g))
		write(t, a, kept, Stdout, []byte(k))
		if err := a.flush(); err != nil {
			t.Fatal(err)
		}
	}
	step("a\n", "1\n") // advances both rows (their first output)
	step("b\n", "2\n") // grows both newest chunks, advances no row
	if _, err := d.Exec(`DELETE FROM jobs WHERE id = ?`, gone); err != nil {
		t.Fatal(err)
	}
	step("c\n", "3\n")
	step("d\n", "4\n")
	flush(t, a)
	if got := storedBytes(readChunks(t, d, kept), ""); string(got) != "1\n2\n3\n4\n" {
		t.Fatalf("kept job: %q", got)
	}
	if n := len(readChunks(t, d, gone)); n != 0 {
		t.Fatalf("removed job has %d chunks", n)
	}
}

// A job whose rows break a rule of the schema loses its batch alone: the
// grouped statements fail, and the job-by-job retry keeps the others.
func TestConstraintFailureCostsOnlyItsJob(t *testing.T) {
	d := openDB(t)
	var dropped []string
	a := NewAppender(d, AppenderOptions{OnDropped: func(id string, n int64, err error) { dropped = append(dropped, id) }})
	defer a.Close()
	bad, good := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, bad, 0)
	track(t, a, good, 0)
	plantChunkAtZero(t, d, bad)
	write(t, a, bad, Stdout, []byte("refused\n"))
	write(t, a, good, Stdout, []byte("kept\n"))
	flush(t, a)
	if got := storedBytes(readChunks(t, d, good), ""); string(got) != "kept\n" {
		t.Fatalf("good job: %q", got)
	}
	flush(t, a) // records the drop in the jobs row
	if row := readJobRow(t, d, bad); row.Dropped != int64(len("refused\n")) {
		t.Fatalf("bad job row %+v, want its bytes counted as dropped", row)
	}
	if len(dropped) != 1 || dropped[0] != bad {
		t.Fatalf("OnDropped for %v, want only %s", dropped, bad)
	}
}

func TestBackPressureBoundsMemory(t *testing.T) {
	d := openDB(t)
	const bound = 64 << 10
	a := newAppender(t, d, AppenderOptions{MaxBatchBytes: bound / 2, MaxPendingBytes: bound,
		BusyTimeout: 20 * time.Second, RetryFor: 20 * time.Second})
	id := newJob(t, d, 0)
	track(t, a, id, 0)

	// Hold the write lock so nothing drains, and watch the writer stop.
	locker := lockDB(t, d)
	var written atomic.Int64
	done := make(chan struct{})
	const total, piece = 1 << 20, 4 << 10
	go func() {
		defer close(done)
		p := bytes.Repeat([]byte("y\n"), piece/2)
		for written.Load() < total {
			if err := a.Write(id, Stdout, p); err != nil {
				t.Error(err)
				return
			}
			written.Add(piece)
		}
	}()
	waitFor(t, 10*time.Second, "the writer to block", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.pending >= bound
	})
	if w := written.Load(); w > bound+piece {
		t.Fatalf("%d bytes accepted with the database locked, bound %d", w, bound)
	}
	locker.release()
	var maxPending int
	for {
		select {
		case <-done:
			flush(t, a)
			if row := readJobRow(t, d, id); row.Output != total || row.Dropped != 0 {
				t.Fatalf("jobs row %+v, want %d bytes, none dropped", row, total)
			}
			if maxPending > bound+piece {
				t.Fatalf("pending reached %d, bound %d", maxPending, bound)
			}
			return
		default:
		}
		a.mu.Lock()
		maxPending = max(maxPending, a.pending)
		a.mu.Unlock()
	}
}

// dbLock holds the database's write lock from a connection of its own.
type dbLock struct {
	release func()
}

func lockDB(t testing.TB, d *db.DB) *dbLock {
	t.Helper()
	other, err := db.Open(context.Background(), d.Path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	l := &dbLock{release: func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			other.Close()
		})
	}}
	t.Cleanup(l.release)
	return l
}

// A locked database is not a full disk: while another connection holds
// the write lock, the output goes to the spool and Write keeps returning;
// once the lock is free, everything is committed in order, nothing
// dropped, and the spool file is gone.
func TestSpooledWhileDatabaseIsLocked(t *testing.T) {
	d := openDB(t)
	var dropped atomic.Int64
	a := newAppender(t, d, AppenderOptions{
		MaxBatchBytes: 16 << 10, MaxPendingBytes: 32 << 10,
		BusyTimeout: 20 * time.Millisecond, RetryFor: 60 * time.Millisecond,
		OnDropped: func(jobID string, n int64, err error) { dropped.Add(n) },
	})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("before\n"))
	flush(t, a)
	locker := lockDB(t, d)

	// A flooding child: its writes must all return although nothing can
	// be committed, and the spool takes far more than MaxPendingBytes.
	const total = 1 << 20
	var want bytes.Buffer
	want.WriteString("before\n")
	done := make(chan error, 1)
	go func() {
		for n := 0; n < total; n += 8 << 10 {
			p := bytes.Repeat([]byte{byte('a' + n/(8<<10)%26)}, 8<<10)
			want.Write(p)
			if err := a.Write(id, Stdout, p); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Write blocked on a locked database")
	}
	if err := a.Flush(context.Background()); !errors.Is(err, errLocked) {
		t.Fatalf("Flush with the database locked: %v, want the output spooled", err)
	}
	if got := storedBytes(readChunks(t, d, id), ""); string(got) != "before\n" {
		t.Fatalf("under the lock, stored %d bytes", len(got))
	}
	locker.release()
	write(t, a, id, Stderr, []byte("back\n"))
	want.WriteString("back\n")
	// With a 20 ms busy timeout, a flush on a loaded machine can still
	// meet the lock busy (the spool being copied in): it stays spooled,
	// as any flush that meets a busy lock, and a later one lands it.
	waitFor(t, time.Minute, "a flush once the lock is free", func() bool {
		err := a.Flush(context.Background())
		if err != nil && !errors.Is(err, errLocked) {
			t.Fatal(err)
		}
		return err == nil
	})

	row := readJobRow(t, d, id)
	stored := storedBytes(readChunks(t, d, id), "")
	if dropped.Load() != 0 || row.Dropped != 0 || !bytes.Equal(stored, want.Bytes()) {
		t.Fatalf("jobs row %+v; OnDropped counted %d; %d of %d bytes stored, equal %v",
			row, dropped.Load(), len(stored), want.Len(), bytes.Equal(stored, want.Bytes()))
	}
	if ents, _ := os.ReadDir(filepath.Dir(d.Path)); len(ents) > 3 {
		t.Errorf("files beside the database: %v", ents)
	}
}

func TestWriteAfterClose(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{})
	a.Open()
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("last words"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storedBytes(readChunks(t, d, id), ""); string(got) != "last words" {
		t.Fatalf("Close did not flush: %q", got)
	}
	if err := a.Write(id, Stdout, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

func TestManyJobsConcurrently(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 1 << 10, MaxBatchBytes: 32 << 10})
	const jobs = 8
	ids := make([]string, jobs)
	models := make([]model, jobs)
	for i := range ids {
		ids[i] = newJob(t, d, 0)
		track(t, a, ids[i], 0)
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 300; k++ {
				s := Stdout
				if k%4 == 0 {
					s = Stderr
				}
				p := []byte(fmt.Sprintf("job %d line %d\n", i, k))
				if err := a.Write(ids[i], s, p); err != nil {
					t.Error(err)
					return
				}
				models[i].write(s, p)
			}
		}()
	}
	wg.Wait()
	flush(t, a)
	for i, id := range ids {
		cs := checkChunks(t, d, id, &models[i], 1<<10)
		if got := storedBytes(cs, ""); !bytes.Equal(got, models[i].data) {
			t.Fatalf("job %d: stored %d bytes, want %d", i, len(got), len(models[i].data))
		}
	}
}

// A trickle extends the job's newest row, flush after flush, up to
// GrowChunk bytes; another stream or a full row starts a new row, and the
// grown rows read back exactly.
func TestTrickleGrowsNewestChunk(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	var m model
	put := func(s Stream, p string) {
		write(t, a, id, s, []byte(p))
		m.write(s, []byte(p))
		flush(t, a)
	}
	put(Stdout, "one\n")
	put(Stdout, "two\n")
	put(Stdout, "three\n")
	cs := checkChunks(t, d, id, &m, DefaultMaxChunk)
	if len(cs) != 1 || string(cs[0].Data) != "one\ntwo\nthree\n" || cs[0].LineCount != 3 {
		t.Fatalf("after three flushes of stdout: %d rows, first %q", len(cs), cs[0].Data)
	}
	put(Stderr, "oops\n")
	put(Stdout, "four\n")
	if cs = checkChunks(t, d, id, &m, DefaultMaxChunk); len(cs) != 3 {
		t.Fatalf("stdout, stderr, stdout: %d rows, want 3", len(cs))
	}
	line := strings.Repeat("x", 99) + "\n"
	for range 3 * GrowChunk / len(line) {
		put(Stdout, line)
	}
	cs = checkChunks(t, d, id, &m, DefaultMaxChunk)
	for _, c := range cs {
		if len(c.Data) > GrowChunk {
			t.Errorf("row at %d grew to %d bytes, more than %d", c.Off, len(c.Data), GrowChunk)
		}
	}
	if len(cs) < 5 {
		t.Errorf("%d rows after %d bytes of trickle; want new rows past GrowChunk", len(cs), 3*GrowChunk)
	}
	got, gap, _ := readAll(t, d, id, 0, Filter{})
	if gap != 0 || !bytes.Equal(got, m.data) {
		t.Fatalf("read back %d bytes (gap %d), want the %d written", len(got), gap, len(m.data))
	}
}

// Under a flood the checkpointer copies the WAL beside the flusher, and
// the flusher lets the WAL start over past WALRestartFrames: the WAL stays
// bounded, and every byte is stored.
func TestFloodKeepsWALBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 80 MiB")
	}
	dir := t.TempDir()
	d, err := db.Open(context.Background(), filepath.Join(dir, "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := NewAppender(d, AppenderOptions{})
	a.Open()
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	piece := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	const total = 80 << 20
	var walMax int64
	for n := 0; n < total; n += len(piece) {
		write(t, a, id, Stdout, piece)
		if fi, err := os.Stat(filepath.Join(dir, "jobs.db-wal")); err == nil {
			walMax = max(walMax, fi.Size())
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart past WALRestartFrames, plus the transactions in flight and
	// the pages beside the chunks: far below the 80 MiB written.
	if bound := int64(db.WALRestartFrames*4096 + 3*(8<<20)); walMax > bound {
		t.Errorf("WAL grew to %d MiB; want at most %d MiB", walMax>>20, bound>>20)
	}
	row := readJobRow(t, d, id)
	if row.Output != total {
		t.Errorf("output_bytes = %d, want %d", row.Output, total)
	}
	var ok string
	if err := d.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check = %q, %v", ok, err)
	}
}

// The job-by-job retry after a constraint failure grows rows too: a
// trickling job in the same batch as a refused one keeps its bytes in its
// newest row.
func TestGrowInJobByJobRetry(t *testing.T) {
	d := openDB(t)
	a := NewAppender(d, AppenderOptions{})
	defer a.Close()
	bad, good := newJob(t, d, 0), newJob(t, d, 0)
	track(t, a, bad, 0)
	track(t, a, good, 0)
	write(t, a, good, Stdout, []byte("first\n"))
	flush(t, a)
	plantChunkAtZero(t, d, bad)
	write(t, a, bad, Stdout, []byte("refused\n"))
	write(t, a, good, Stdout, []byte("kept\n"))
	flush(t, a)
	cs := readChunks(t, d, good)
	if len(cs) != 1 || string(cs[0].Data) != "first\nkept\n" || cs[0].LineCount != 2 {
		t.Fatalf("good job rows %+v, want one row \"first\\nkept\\n\"", cs)
	}
}

// TestFloodRecyclesChunkBuffers: under a flood of several jobs at once,
// text and random, written while the flusher commits (and each writer
// flushes now and then), the buffers of written chunks are given to new
// chunks, and every byte reads back as written: a buffer given back while
// its chunk was still to be compressed or written would show here as
// another chunk's bytes.
func TestFloodRecyclesChunkBuffers(t *testing.T) {
	// The buffers given back wait in a sync.Pool, which every garbage
	// collection empties: on a loaded machine the collections came often
	// enough to leave 58 of 64 chunks without a buffer to reuse. The
	// collector is off while the test floods (it runs alone: it is not
	// parallel), so what is counted is the appender's recycling alone,
	// except that it runs to keep the heap under a memory limit: with no
	// collection at all, the long flood's garbage grew the test process
	// to 3.4 GiB (8 GiB under the race detector; 1.1 and 3.1 GiB with the
	// limit), which beside the rest of the race run stalled it until a
	// flush took the database for locked.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(256 << 20))
	d := openDB(t)
	// At most eight chunks wait to be written (MaxPendingBytes): the
	// writers block beyond it, so however the flusher is scheduled, the
	// chunks that follow find written chunks' buffers given back (up to
	// 32 chunks could wait with the default, half of what is written).
	a := newAppender(t, d, AppenderOptions{MaxBatchBytes: 256 << 10, MaxPendingBytes: 512 << 10})
	const jobs = 4
	perJob := testlong.Pick(1<<20, 8<<20)
	ids := make([]string, jobs)
	models := make([]model, jobs)
	for i := range ids {
		ids[i] = newJob(t, d, 0)
		track(t, a, ids[i], 0)
	}
	random := randomOutput(t, perJob)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			var line []byte
			for n, k := 0, 0; n < perJob; k++ {
				// Each job's text is its own (numbered lines), so a chunk
				// holding another's bytes cannot read back as this job's.
				p := random[n:min(n+(16<<10), perJob)]
				if i%2 == 0 {
					line = line[:0]
					for len(line) < 16<<10 {
						line = fmt.Appendf(line, "job %d write %d: gcc -O2 -c src/core/alloc_%d.c -o build/alloc_%d.o\n", i, k, k%977, k%977)
					}
					p = line[:min(len(line), perJob-n)]
				}
				if err := a.Write(ids[i], Stdout, p); err != nil {
					t.Error(err)
					return
				}
				models[i].write(Stdout, p)
				n += len(p)
				// Every 256 KiB or so a flush of its own, beside the
				// flusher's: the chunks written by then give their
				// buffers back, for the chunks that follow to reuse,
				// however the machine schedules the flusher (on one
				// busy core the writers could fill every chunk before
				// it ran once, and nothing was given back in time).
				if k%16 == 15 {
					if err := a.Flush(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	flush(t, a)
	for i, id := range ids {
		got, gap, _ := readAll(t, d, id, MaxLimit, Filter{})
		if gap != 0 || !bytes.Equal(got, models[i].data) {
			t.Fatalf("job %d: read %d bytes (gap %d), not the %d written", i, len(got), gap, len(models[i].data))
		}
	}
	chunks := int64(jobs * perJob / DefaultMaxChunk)
	made := a.bufsMade.Load()
	t.Logf("%d chunk buffers made for %d chunks", made, chunks)
	// The race detector's sync.Pool drops a quarter of what is given
	// back, and a collection empties it: the bound is loose, but without
	// recycling every chunk makes its own.
	if made > chunks*9/10 {
		t.Errorf("%d chunk buffers made for %d chunks: written chunks' buffers are not reused", made, chunks)
	}
}

// TestDroppedChunksRecycleSafely: a chunk is compressed by a goroutine of
// its own, which may not have run when its batch is dropped (here every
// batch, the disk being "full": MinFree larger than any disk) and the
// chunk's buffer given to a new chunk. The buffer must not be given back
// while that goroutine may still read it: the race detector sees the
// compression read a buffer a later Write fills. Every byte is counted
// dropped.
func TestDroppedChunksRecycleSafely(t *testing.T) {
	d := openDB(t)
	var dropped atomic.Int64
	a := newAppender(t, d, AppenderOptions{MinFree: 1 << 50, RetryFor: time.Millisecond,
		OnDropped: func(_ string, n int64, _ error) { dropped.Add(n) }})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	text := textOutput(DefaultMaxChunk)
	const writes = 200
	for i := range writes {
		write(t, a, id, Stdout, text)
		if i%4 == 3 {
			_ = a.Flush(context.Background()) // dropped: the disk is "full"
		}
	}
	_ = a.Flush(context.Background())
	if got, want := dropped.Load(), int64(writes*len(text)); got != want {
		t.Errorf("%d bytes counted dropped, want %d", got, want)
	}
}

// A flush of the spool ends when every write fails, not only when the
// database is locked: with the database closed under an appender whose
// output was spooled (a failing test's cleanup order, as a failing disk
// would), the flusher took the spooled output, failed to write it,
// counted it dropped, spooled the drop count to record it, failed again,
// and so on, without end (seen in a loaded run: a Close that waited 9
// minutes for the flusher).
func TestSpoolFlushEndsWhenWritesFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	a := NewAppender(d, AppenderOptions{BusyTimeout: 20 * time.Millisecond, RetryFor: 60 * time.Millisecond})
	a.Open()
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	locker := lockDB(t, d)
	write(t, a, id, Stdout, []byte("spooled\n"))
	if err := a.Flush(ctx); !errors.Is(err, errLocked) {
		t.Fatalf("Flush with the database locked: %v, want the output spooled", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The writer's connection outlives the pool's close; without it,
	// every write fails.
	a.flushing <- struct{}{}
	a.dropWriterLocked()
	<-a.flushing
	locker.release()
	done := make(chan error, 2)
	go func() { done <- a.Flush(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Flush with every write failing returned no error")
		}
	case <-time.After(time.Minute):
		t.Fatal("Flush of the spool did not end with every write failing")
	}
	go func() { done <- a.Close() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not end with every write failing")
	}
}
