package logs

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// How chunks are stored.
//
// A chunk of a flood (at least compressMin bytes, written whole) is stored
// as one zstd frame when that saves at least an eighth of it, and its
// chunks.size column then holds its length as written; every other chunk
// (a trickle's, one that grows in place, output that does not compress,
// such as random or already compressed bytes) keeps its bytes as they are
// and a NULL size. Offsets, line numbers and counts are always those of the
// output as written: only the data column differs.
//
// Text compresses 5 to 10 times, so a flood of text writes that much less
// to SQLite, whose cost grows with the pages written (the WAL, its
// checkpoint, the copies of the blob on the way), and the output cap keeps
// the same bytes in less room.
const (
	// compressMin is the smallest chunk that is compressed: below it the
	// frame's own bytes and the call cost more than they save, and rows
	// that small are a trickle's, which may still grow.
	compressMin = 8 << 10
	// maxDecoded bounds what one stored frame may decode to: the largest
	// chunk any version writes, with room to spare. A frame that claims
	// more is damage.
	maxDecoded = 64 << 20
	// probeBytes is the sample of a large chunk compressed first: a chunk
	// whose sample does not shrink by a quarter is stored as is.
	probeBytes = 8 << 10
)

// errCorruptChunk is returned for stored data that does not decode to the
// size its row gives.
var errCorruptChunk = errors.New("stored chunk does not decode to its size")

var (
	decoderOnce sync.Once
	decoder     *zstd.Decoder
	decoderErr  error
)

// encoders are the encoders every appender shares, one for each way a
// chunk is compressed, each made on first use: EncodeAll is safe for
// concurrent use, GOMAXPROCS calls at a time (Write compresses as many
// chunks at once), and a frame needs no window larger than a chunk.
//
// Compression is most of what a flood of text costs the supervisor, so
// packFast is zstd's fastest level without entropy coding of the
// literals: on a build log, about a quarter faster for frames a seventh
// larger (chunks of 64 KiB 8.0 times smaller than the text instead of
// 9.2).
//
// packLit is for output that the fast one cannot shrink but whose bytes
// are few different ones: numbers, hex, CSV (a chunk of `seq 1 100000`
// has 11 byte values and almost no repeat of four bytes or more, which
// the fast encoder needs). It entropy-codes every literal: 2.4 times
// smaller for that chunk, at about a third of the fast encoder's speed,
// spent only on chunks the fast one does not shrink.
var encoders = [...]func() (*zstd.Encoder, error){
	packFast: sync.OnceValues(func() (*zstd.Encoder, error) {
		return newChunkEncoder(zstd.WithNoEntropyCompression(true))
	}),
	packLit: sync.OnceValues(func() (*zstd.Encoder, error) {
		return newChunkEncoder(zstd.WithAllLitEntropyCompression(true))
	}),
}

// newChunkEncoder returns an encoder of chunks that codes literals as
// literals says (see encoders).
func newChunkEncoder(literals zstd.EOption) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		literals,
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(DefaultMaxChunk))
}

// chunkDecoder is the decoder every reader shares (DecodeAll is safe for
// concurrent use). One decoding at a time: a read verb is a short process
// that decodes a few chunks, one after another, and should not set up a
// decoder per core for them.
func chunkDecoder() (*zstd.Decoder, error) {
	decoderOnce.Do(func() {
		decoder, decoderErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxDecoded),
			zstd.WithDecoderMaxWindow(maxDecoded))
	})
	return decoder, decoderErr
}

// scratch holds buffers that frames are compressed into before they are
// copied out at their size: EncodeAll into an empty slice allocates as
// much as its input, and a frame kept in such a buffer held a whole
// chunk's room for an eighth of it (a text capture's supervisor peaked
// 5 MiB higher).
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// packWay is how a chunk was stored: as is, or compressed by the fast
// encoder or by the literal one (encoders).
type packWay int32

const (
	packNone packWay = iota
	packFast
	packLit
)

// packChunk returns the stored form of p, a zstd frame at its own size,
// or nil when p is stored as is (encodeChunk). packs, when set, is the
// job's hint: how its last full chunk was stored. A chunk of a job whose
// last one compressed is compressed the same way at once, without the
// sample first, which would only cost it an eighth more (compressing the
// samples of a flood of text was a ninth of its compression); packChunk
// sets the hint for the next.
func packChunk(p []byte, packs *atomic.Int32) []byte {
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	hint := packNone
	if packs != nil {
		hint = packWay(packs.Load())
	}
	out, way := encodeChunk((*buf)[:0], p, hint)
	*buf = out[:0]
	if packs != nil && len(p) >= compressMin {
		packs.Store(int32(way))
	}
	if way == packNone {
		return nil
	}
	return bytes.Clone(out)
}

// encodeChunk appends the stored form of p to dst: a zstd frame, with the
// way it was made, when p is at least compressMin bytes and the frame
// saves at least an eighth of it; else dst is returned unchanged with
// packNone and p is stored as it is. hint is the way to try alone (the
// job's last chunk compressed so); packNone tries the fast encoder on a
// sample of a large p first, and the literal encoder on output of few
// byte values that the fast one does not shrink.
func encodeChunk(dst, p []byte, hint packWay) (out []byte, way packWay) {
	if len(p) < compressMin {
		return dst, packNone
	}
	if hint != packNone {
		return compressWith(dst, p, hint)
	}
	enc, err := encoders[packFast]()
	if err != nil {
		return dst, packNone // stored as is: compression only saves room
	}
	// A sample from the middle tells output that does not compress
	// (random or compressed bytes) for an eighth of the cost of trying
	// the whole chunk, which was a ninth of the supervisor's CPU in a
	// flood of random bytes.
	sample := p
	if len(p) >= 4*probeBytes {
		mid := len(p)/2 - probeBytes/2
		sample = p[mid : mid+probeBytes]
		if z := enc.EncodeAll(sample, dst[len(dst):]); len(z) <= probeBytes-probeBytes/4 {
			return compressWith(dst, p, packFast)
		}
	} else if out, way := compressWith(dst, p, packFast); way != packNone {
		return out, way
	}
	if fewValues(sample) {
		return compressWith(dst, p, packLit)
	}
	return dst, packNone
}

// compressWith appends p compressed the given way (packFast or packLit)
// to dst, when that saves at least an eighth of it.
func compressWith(dst, p []byte, way packWay) ([]byte, packWay) {
	enc, err := encoders[way]()
	if err != nil {
		return dst, packNone
	}
	out := enc.EncodeAll(p, dst)
	if len(out)-len(dst) > len(p)-len(p)/8 {
		return dst, packNone
	}
	return out, way
}

// fewValues reports whether the bytes of p are few enough different ones
// for entropy coding alone to save a quarter of them: their entropy is at
// most 6 bits a byte. Random bytes have nearly 8; a count of them costs a
// fraction of compressing them.
func fewValues(p []byte) bool {
	var n [256]int
	for _, b := range p {
		n[b]++
	}
	var h float64
	for _, k := range n {
		if k > 0 {
			f := float64(k) / float64(len(p))
			h -= f * math.Log2(f)
		}
	}
	return h <= 6
}

// decodeChunk appends to dst the output stored in data: data itself when
// size is negative (stored as is), else the zstd frame's content, which
// must be size bytes.
func decodeChunk(dst, data []byte, size int64) ([]byte, error) {
	if size < 0 {
		return append(dst, data...), nil
	}
	if size > maxDecoded {
		return nil, fmt.Errorf("decode chunk of %d bytes: %w", size, errCorruptChunk)
	}
	dec, err := chunkDecoder()
	if err != nil {
		return nil, fmt.Errorf("decode chunk: %w", err)
	}
	n := len(dst)
	if cap(dst)-n < int(size) {
		dst = append(dst[:n:n], make([]byte, size)...)[:n]
	}
	out, err := dec.DecodeAll(data, dst)
	if err != nil {
		return nil, fmt.Errorf("decode chunk: %w: %w", errCorruptChunk, err)
	}
	if int64(len(out)-n) != size {
		return nil, fmt.Errorf("decode chunk: %d bytes, its row says %d: %w", len(out)-n, size, errCorruptChunk)
	}
	return out, nil
}

// DecodeChunk returns the output a chunk row holds, given its data and
// size columns: data itself when size is NULL, else data decoded, for
// tests and tools that read the chunks table directly.
func DecodeChunk(data []byte, size sql.NullInt64) ([]byte, error) {
	if !size.Valid {
		return data, nil
	}
	return decodeChunk(nil, data, size.Int64)
}
