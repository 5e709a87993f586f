package logs

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
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
	encoderOnce sync.Once
	encoder     *zstd.Encoder
	encoderErr  error

	decoderOnce sync.Once
	decoder     *zstd.Decoder
	decoderErr  error
)

// chunkEncoder is the encoder every appender shares: EncodeAll is safe for
// concurrent use, GOMAXPROCS calls at a time (Write compresses as many
// chunks at once), and a frame needs no window larger than a chunk.
// Compression is most of what a flood of text costs the
// supervisor, so it is zstd's fastest level without entropy coding of the
// literals: on a build log, about a quarter faster for frames a seventh
// larger (chunks of 64 KiB 8.0 times smaller than the text instead of
// 9.2).
func chunkEncoder() (*zstd.Encoder, error) {
	encoderOnce.Do(func() {
		encoder, encoderErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithNoEntropyCompression(true),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithLowerEncoderMem(true),
			zstd.WithWindowSize(DefaultMaxChunk))
	})
	return encoder, encoderErr
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

// packChunk returns the stored form of p, a zstd frame at its own size,
// or nil when p is stored as is (encodeChunk). packs, when set, is the
// job's hint: whether its last chunk compressed. A chunk of a job whose
// last one did is compressed whole without the sample first, which would
// only cost it an eighth more (compressing the samples of a flood of text
// was a ninth of its compression); packChunk sets the hint for the next.
func packChunk(p []byte, packs *atomic.Bool) []byte {
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	probe := packs == nil || !packs.Load()
	out, ok := encodeChunk((*buf)[:0], p, probe)
	*buf = out[:0]
	if packs != nil && len(p) >= compressMin {
		packs.Store(ok)
	}
	if !ok {
		return nil
	}
	return bytes.Clone(out)
}

// encodeChunk appends the stored form of p to dst: a zstd frame, with
// ok set, when p is at least compressMin bytes and the frame saves at
// least an eighth of it; else dst is returned unchanged and p is stored as
// it is. With probe, a sample of a large p is compressed first.
func encodeChunk(dst, p []byte, probe bool) (out []byte, ok bool) {
	if len(p) < compressMin {
		return dst, false
	}
	enc, err := chunkEncoder()
	if err != nil {
		return dst, false // stored as is: compression only saves room
	}
	// A sample from the middle tells output that does not compress
	// (random or compressed bytes) for an eighth of the cost of trying
	// the whole chunk, which was a ninth of the supervisor's CPU in a
	// flood of random bytes.
	if probe && len(p) >= 4*probeBytes {
		mid := len(p)/2 - probeBytes/2
		sample := enc.EncodeAll(p[mid:mid+probeBytes], dst[len(dst):])
		if len(sample) > probeBytes-probeBytes/4 {
			return dst, false
		}
	}
	out = enc.EncodeAll(p, dst)
	if len(out)-len(dst) > len(p)-len(p)/8 {
		return dst, false
	}
	return out, true
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
