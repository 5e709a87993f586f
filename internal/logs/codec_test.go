package logs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentjobs/jobs/internal/testlong"
)

// textOutput is n bytes of a build log: compiler-like lines.
func textOutput(n int) []byte {
	return benchData(n)
}

// randomOutput is n random bytes, which do not compress.
func randomOutput(t testing.TB, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := rand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzChunkCodec: whatever a chunk holds, its stored form decodes to
// exactly its bytes, and a chunk is stored compressed only when that
// saves room.
func FuzzChunkCodec(f *testing.F) {
	f.Add([]byte("hello\n"), 0)
	f.Add(textOutput(compressMin), 0)
	f.Add(textOutput(3*compressMin+17), 1)
	f.Add(bytes.Repeat([]byte{0}, 100<<10), 2)
	f.Add(bytes.Repeat([]byte("\xff\xfe\r\n\x1b[2J"), 5000), 3)
	f.Fuzz(func(t *testing.T, p []byte, repeat int) {
		// Small inputs are repeated so that the compressed path is taken.
		for range repeat % 8 {
			if len(p) >= compressMin {
				break
			}
			p = append(p, p...)
		}
		stored, way := encodeChunk(nil, p, packWay((repeat%3+3)%3)) // a hint the appender stores
		packed := way != packNone
		size := int64(-1)
		if !packed {
			stored = p
		} else {
			size = int64(len(p))
			if len(stored) > len(p)-len(p)/8 {
				t.Fatalf("%d bytes stored compressed as %d", len(p), len(stored))
			}
		}
		got, err := decodeChunk(nil, stored, size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("%d bytes (packed %v) decode to %d other bytes", len(p), packed, len(got))
		}
	})
}

func TestChunkCodec(t *testing.T) {
	text := textOutput(DefaultMaxChunk)
	stored, way := encodeChunk(nil, text, packNone)
	if way != packFast || len(stored)*5 > len(text) {
		t.Fatalf("a chunk of text: stored %v, %d bytes for %d", way, len(stored), len(text))
	}
	// Numbers: few byte values, too few repeats for the fast encoder.
	numbers := numberOutput(DefaultMaxChunk)
	if z, way := encodeChunk(nil, numbers, packNone); way != packLit || len(z)*2 > len(numbers) {
		t.Fatalf("a chunk of numbers: stored %v, %d bytes for %d", way, len(z), len(numbers))
	} else if got, err := decodeChunk(nil, z, int64(len(numbers))); err != nil || !bytes.Equal(got, numbers) {
		t.Fatalf("a chunk of numbers decodes to %d other bytes, %v", len(got), err)
	}
	for _, p := range [][]byte{randomOutput(t, DefaultMaxChunk), randomOutput(t, 3*probeBytes)} {
		if _, way := encodeChunk(nil, p, packNone); way != packNone {
			t.Fatalf("a chunk of %d random bytes was stored compressed (%v)", len(p), way)
		}
	}
	if _, way := encodeChunk(nil, text[:compressMin-1], packNone); way != packNone {
		t.Fatal("a chunk under compressMin was stored compressed")
	}
	// Damage is reported, never returned as output.
	if _, err := decodeChunk(nil, stored, int64(len(text))+1); !errors.Is(err, errCorruptChunk) {
		t.Fatalf("a size one past the frame's: %v", err)
	}
	bad := bytes.Clone(stored)
	bad[len(bad)/2] ^= 0xff
	if out, err := decodeChunk(nil, bad, int64(len(text))); err == nil && bytes.Equal(out, text) {
		t.Fatal("a damaged frame decoded to the original")
	} else if err == nil {
		t.Fatal("a damaged frame decoded without an error")
	}
	// Decoding appends to dst.
	out, err := decodeChunk([]byte("x"), stored, int64(len(text)))
	if err != nil || !bytes.Equal(out[1:], text) || out[0] != 'x' {
		t.Fatalf("decode after a prefix: %v", err)
	}
}

// numberOutput is n bytes of counting, as `seq` prints it from 10000 on.
func numberOutput(n int) []byte {
	var b []byte
	for i := 10000; len(b) < n; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	return b[:n]
}

// TestPackHint: a job's chunk is compressed whole, the way its last one
// was, without the sample first; the hint follows what the chunks turn
// out to be (text by the fast encoder, numbers by the literal one), and a
// chunk that does not compress is stored as is whatever the hint said.
func TestPackHint(t *testing.T) {
	text, random, numbers := textOutput(DefaultMaxChunk), randomOutput(t, DefaultMaxChunk), numberOutput(DefaultMaxChunk)
	var packs atomic.Int32
	for i, step := range []struct {
		p      []byte
		packed bool
		to     packWay
	}{
		{text, true, packFast},
		{text, true, packFast},
		{random, false, packNone}, // the hint said it would compress
		{random, false, packNone},
		{text[:compressMin-1], false, packNone}, // too small to say anything
		{numbers, true, packLit},
		{numbers, true, packLit},
		{random, false, packNone},
		{text, true, packFast},
		{text[:compressMin-1], false, packFast},
	} {
		stored := packChunk(step.p, &packs)
		if (stored != nil) != step.packed || packWay(packs.Load()) != step.to {
			t.Fatalf("step %d: packed %v, hint %v; want %v, %v", i, stored != nil, packs.Load(), step.packed, step.to)
		}
		if stored != nil {
			got, err := decodeChunk(nil, stored, int64(len(step.p)))
			if err != nil || !bytes.Equal(got, step.p) {
				t.Fatalf("step %d: decodes to %d other bytes, %v", i, len(got), err)
			}
		}
	}
}

// TestOutputChangesKind: one job's flood turns from text to random bytes
// and back; each stretch is stored as its kind is (compressed, then in
// the output data file) and read back exactly.
func TestOutputChangesKind(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	n := testlong.Pick(8, 32) * DefaultMaxChunk
	parts := [][]byte{textOutput(n), randomOutput(t, n), textOutput(n)}
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	var all []byte
	for _, part := range parts {
		for p := part; len(p) > 0; {
			k := min(len(p), 64<<10-7)
			write(t, a, id, Stdout, p[:k])
			p = p[k:]
		}
		all = append(all, part...)
	}
	flush(t, a)
	cs := readChunks(t, d, id)
	packed := make([]int, len(parts))
	for _, c := range cs {
		if c.Packed {
			packed[c.Off/int64(n)]++
		}
	}
	// The chunks that straddle a change of kind may go either way.
	per := n / DefaultMaxChunk
	if packed[0] < per-1 || packed[1] > 1 || packed[2] < per-1 {
		t.Fatalf("compressed chunks per stretch of %d: %v", per, packed)
	}
	if got := storedBytes(cs, ""); !bytes.Equal(got, all) {
		t.Fatalf("stored %d bytes, not the %d written", len(got), len(all))
	}
	got, gap, _ := readAll(t, d, id, 1<<20, Filter{})
	if gap != 0 || !bytes.Equal(got, all) {
		t.Fatalf("read %d bytes, gap %d; want the %d written", len(got), gap, len(all))
	}
}

// TestCompressedOutputByteExact: a flood of text (stored compressed) and
// one of random bytes (stored as is), written through the appender to a
// real database, read back exactly by every kind of read; offsets and
// line numbers are those of the output as written. Each flood is 1 MiB
// and a bit (sixteen chunks), 3 MiB and a bit with the long sizes.
func TestCompressedOutputByteExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	size := testlong.Pick(1<<20+12345, 3<<20+12345)
	for _, tc := range []struct {
		name   string
		data   []byte
		packed bool
	}{
		{"text", textOutput(size), true},
		{"random", randomOutput(t, size), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := newJob(t, d, 0)
			track(t, a, id, 0)
			for p := tc.data; len(p) > 0; {
				n := min(len(p), 64<<10-7) // pipe-sized writes, off the chunk grid
				write(t, a, id, Stdout, p[:n])
				p = p[n:]
			}
			flush(t, a)
			cs := readChunks(t, d, id)
			var packed int
			for _, c := range cs {
				if c.Packed {
					packed++
				}
			}
			if tc.packed && packed < len(cs)/2 || !tc.packed && packed > 0 {
				t.Fatalf("%d of %d chunks stored compressed", packed, len(cs))
			}
			// Full chunks that do not compress are stored in the output
			// data file, and only those.
			var external int
			for _, c := range cs {
				if c.External {
					external++
					if c.Packed || len(c.Data) < externalMin {
						t.Fatalf("chunk at %d (%d bytes, packed %v) stored in the output data file", c.Off, len(c.Data), c.Packed)
					}
				}
			}
			if tc.packed && external > 0 || !tc.packed && external < len(cs)/2 {
				t.Fatalf("%d of %d chunks stored in the output data file", external, len(cs))
			}
			if got := storedBytes(cs, ""); !bytes.Equal(got, tc.data) {
				t.Fatalf("stored %d bytes, not the %d written", len(got), len(tc.data))
			}
			for _, limit := range []int64{1000, 64 << 10, 1 << 20} {
				got, gap, _ := readAll(t, d, id, limit, Filter{})
				if gap != 0 || !bytes.Equal(got, tc.data) {
					t.Fatalf("pages of %d: %d bytes read, gap %d", limit, len(got), gap)
				}
			}
			// A page deep inside a compressed chunk.
			off := int64(DefaultMaxChunk + 1001)
			p, err := ReadRange(ctx, d, id, off, 5000, Filter{})
			if err != nil || !bytes.Equal(p.Data, tc.data[off:off+5000]) {
				t.Fatalf("page at %d: %v", off, err)
			}
			if want := int64(bytes.Count(tc.data[:off], newline)); p.LinesBefore != want {
				t.Fatalf("page at %d: first line %d, want %d", off, p.LinesBefore, want)
			}
			tail, err := Tail(ctx, d, id, 500, Bytes, Filter{})
			if err != nil || !bytes.Equal(tail.Data, tc.data[len(tc.data)-500:]) {
				t.Fatalf("tail: %d bytes, %v", len(tail.Data), err)
			}
			if tc.packed {
				lines := bytes.SplitAfter(tc.data, newline)
				from := int64(len(lines) / 2)
				p, err := ReadLines(ctx, d, id, from, 3, Filter{})
				if err != nil || !bytes.Equal(p.Data, bytes.Join(lines[from:from+3], nil)) {
					t.Fatalf("lines %d..%d: %q, %v", from, from+3, p.Data, err)
				}
				k := len(lines) * 3 / 4 // a line deep in the output
				re := regexp.MustCompile(fmt.Sprintf(`^%08d `, k))
				g, err := ReadRange(ctx, d, id, 0, MaxLimit, Filter{Grep: re})
				want := lines[k]
				if err != nil || !bytes.Equal(g.Data, want) {
					t.Fatalf("grep: %q, want %q, %v", g.Data, want, err)
				}
			}
		})
	}
}

// TestCapTrimsCompressedChunk: the output cap cuts the front of a chunk
// stored compressed; what stays is exactly the head and the newest bytes.
// The job writes 3 MiB with the long sizes, else 1.5 MiB: three times its
// cap, enforced after each of its writes.
func TestCapTrimsCompressedChunk(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{HeadKeep: 64 << 10})
	const maxOutput = 512 << 10
	id := newJob(t, d, maxOutput)
	track(t, a, id, maxOutput)
	writeCapped(t, d, a, id, textOutput(testlong.Pick(3<<19, 3<<20)), 40000, 64<<10, maxOutput)
}
