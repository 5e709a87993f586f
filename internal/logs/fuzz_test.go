package logs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"regexp"

	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/testlong"
)

// FuzzAppendRead appends the writes a script describes (sizes, streams,
// flushes, a small cap and small chunks) and checks that the chunks hold
// exactly what was written, that only the middle was evicted, and that
// every kind of read reassembles the stored bytes.
func FuzzAppendRead(f *testing.F) {
	f.Add([]byte("\x09hello\n\x0aworld\x00\xff\x00\x11\xe2\x82\xac\n"), uint16(0), uint8(3), uint8(4))
	f.Add([]byte("\x3fabcdefgh\nijklmnop\x0f\xc3\xa9\xc3\xa9\n\x07\x00\x3eqrs\ntuv\n\x08"), uint16(40), uint8(5), uint8(8))
	f.Add(bytes.Repeat([]byte("\x37line\nof text é\n\x00\x2e\xf0\x9f\x98\x80\n"), 20), uint16(100), uint8(16), uint8(20))
	f.Add(bytes.Repeat([]byte("\x0f\x80\x80\n\x17ok\n\n"), 30), uint16(64), uint8(0), uint8(0))
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, script []byte, capBytes uint16, chunk, head uint8) {
	{
		maxChunk := 1 + int(chunk%64)
		headKeep := 1 + int64(head)
		var maxOutput int64
		if capBytes%4 != 0 {
			maxOutput = 16 + int64(capBytes%2048)
		}
		d := openDB(t)
		a := NewAppender(d, AppenderOptions{MaxChunk: maxChunk, HeadKeep: headKeep})
		defer a.Close()
		id := newJob(t, d, maxOutput)
		track(t, a, id, maxOutput)

		var m model
		for i := 0; i < len(script); {
			op := script[i]
			i++
			if op%8 == 0 {
				flush(t, a)
				continue
			}
			s := Stdout
			if op%8 >= 5 {
				s = Stderr
			}
			n := int(op>>3) + 1
			p := append([]byte(nil), script[i:min(i+n, len(script))]...)
			i += len(p)
			for k, b := range p {
				if b%9 == 0 {
					p[k] = '\n'
				}
			}
			if op%8 == 7 {
				p = bytes.Repeat(p, 20)
			}
			write(t, a, id, s, p)
			m.write(s, p)
		}
		flush(t, a)
		checkOutput(t, d, id, &m, maxOutput, min(headKeep, maxOutput/2), maxChunk)
	}
}

// checkOutput checks the stored output of id against what was written and
// every reader against the stored bytes.
func checkOutput(t *testing.T, d *db.DB, id string, m *model, maxOutput, head int64, maxChunk int) {
	t.Helper()
	ctx := context.Background()
	cs := checkChunks(t, d, id, m, maxChunk)
	stored := storedBytes(cs, "")
	total := int64(len(m.data))
	row := readJobRow(t, d, id)
	if row.Output != total || row.Lines != int64(bytes.Count(m.data, newline)) ||
		row.Evicted != total-int64(len(stored)) || row.Dropped != 0 {
		t.Fatalf("jobs row %+v: want %d bytes, %d lines, %d evicted", row, total,
			bytes.Count(m.data, newline), total-int64(len(stored)))
	}
	// Only the middle is evicted: the head, then a suffix.
	keptHead := min(head, total)
	if maxOutput == 0 {
		keptHead = total
	}
	if int64(len(stored)) < keptHead || !bytes.Equal(stored[:keptHead], m.data[:keptHead]) {
		t.Fatalf("head of %d bytes not kept", keptHead)
	}
	if !bytes.HasSuffix(m.data, stored[keptHead:]) {
		t.Fatalf("bytes after the head are not the newest output")
	}
	if maxOutput > 0 && int64(len(stored)) > maxOutput+int64(maxChunk) {
		t.Fatalf("retained %d bytes, cap %d", len(stored), maxOutput)
	}

	// Small pages, but not so small that big inputs take thousands of reads.
	for _, limit := range []int64{0, 1 + total/64, 7 + total/16} {
		got, gap, _ := readAll(t, d, id, limit, Filter{})
		if !bytes.Equal(got, stored) || gap != row.Evicted {
			t.Fatalf("limit %d: read %q (gap %d), stored %q (evicted %d)", limit, got, gap, stored, row.Evicted)
		}
	}
	for _, s := range []Stream{Stdout, Stderr} {
		want := storedBytes(cs, s)
		if got, _, _ := readAll(t, d, id, 5+total/32, Filter{Stream: s}); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %q, want %q", s, got, want)
		}
		p, err := Tail(ctx, d, id, 6, Bytes, Filter{Stream: s})
		if err != nil {
			t.Fatal(err)
		}
		if w := want[max(0, len(want)-6):]; !bytes.Equal(p.Data, w) {
			t.Fatalf("%s: tail %q, want %q", s, p.Data, w)
		}
	}
	for _, n := range []int64{1, 2, 5, 50} {
		p, err := Tail(ctx, d, id, n, Chars, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		chars := splitChars(stored)
		want := []byte{}
		for _, c := range chars[max(0, len(chars)-int(n)):] {
			want = append(want, c...)
		}
		if !bytes.Equal(p.Data, want) || p.End != total {
			t.Fatalf("tail %d chars = %q, want %q", n, p.Data, want)
		}
		if len(want) > 0 && int64(len(want)) <= int64(len(stored))-keptHead && p.Start != total-int64(len(want)) {
			t.Fatalf("tail %d chars starts at %d, want %d", n, p.Start, total-int64(len(want)))
		}
		p, err = TailLines(ctx, d, id, n, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if w := lastLines(stored, int(n)); !bytes.Equal(p.Data, w) {
			t.Fatalf("tail %d lines = %q, want %q", n, p.Data, w)
		}
	}
	if row.Evicted == 0 {
		lines := splitLines(m.data)
		for _, r := range [][2]int{{0, 1}, {1, 2}, {2, 0}, {len(lines) / 2, 3}, {len(lines) - 1, 1}, {len(lines), 1}} {
			if r[0] < 0 {
				continue
			}
			p, err := ReadLines(ctx, d, id, int64(r[0]), int64(r[1]), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			from := min(r[0], len(lines))
			to := len(lines)
			if r[1] > 0 {
				to = min(from+r[1], len(lines))
			}
			want := bytes.Join(lines[from:to], nil)
			if !bytes.Equal(p.Data, want) {
				t.Fatalf("ReadLines(%d, %d) = %q, want %q", r[0], r[1], p.Data, want)
			}
		}
	}
	re := regexp.MustCompile(`[a-e]`)
	for _, s := range []Stream{"", Stdout, Stderr} {
		var want []byte
		for _, l := range splitLines(storedBytes(cs, s)) {
			if re.Match(bytes.TrimSuffix(l, newline)) {
				want = append(want, l...)
			}
		}
		p, err := ReadRange(ctx, d, id, 0, MaxLimit, Filter{Stream: s, Grep: re})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Data, want) {
			t.Fatalf("grep %q: %q, want %q", s, p.Data, want)
		}
		p, err = TailLines(ctx, d, id, 2, Filter{Stream: s, Grep: re})
		if err != nil {
			t.Fatal(err)
		}
		if w := lastLines(want, 2); !bytes.Equal(p.Data, w) {
			t.Fatalf("grep %q tail 2 lines: %q, want %q", s, p.Data, w)
		}
	}
}

// splitLines splits b after each newline.
func splitLines(b []byte) [][]byte {
	var ls [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b) - 1
		}
		ls = append(ls, b[:i+1])
		b = b[i+1:]
	}
	return ls
}

// lastLines is tail -n n.
func lastLines(b []byte, n int) []byte {
	ls := splitLines(b)
	out := bytes.Join(ls[max(0, len(ls)-n):], nil)
	if out == nil {
		out = []byte{}
	}
	return out
}

// TestRandomScripts runs FuzzAppendRead's check on pseudo-random scripts,
// so plain go test covers more than the original interface corpus: fuzzing itself is slow
// here because the coverage instrumentation includes the transpiled SQLite.
// It runs the first 4 scripts of its fixed sequence, all 8 with the long
// sizes (at most 5 with -short).
func TestRandomScripts(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n := testlong.Pick(4, 8)
	if testing.Short() {
		n = min(n, 5)
	}
	for i := 0; i < n; i++ {
		script := make([]byte, r.Intn(1500))
		r.Read(script)
		capBytes, chunk, head := uint16(r.Intn(1<<16)), uint8(r.Intn(256)), uint8(r.Intn(256))
		t.Run(fmt.Sprint(i), func(t *testing.T) { t.Parallel(); fuzzOne(t, script, capBytes, chunk, head) })
	}
}
