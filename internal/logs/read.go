package logs

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/db"
)

// Filter narrows a read. The zero Filter reads everything.
type Filter struct {
	// Stream keeps only the bytes of one stream; "" keeps all.
	Stream Stream
	// Grep keeps only the lines that match (tested without their newline).
	// Lines are those of the bytes the Stream filter keeps, so a stdout line
	// interrupted by stderr output is still one line. A line longer than
	// MaxGrepLine is tested and returned in part (see there).
	Grep *regexp.Regexp
	// Shown, when set, turns a line into the text its reader is shown (an
	// agent reads text with escapes stripped and carriage-return
	// overwrites collapsed), and Grep is tested against that text: a
	// pattern finds what the reader sees, not the bytes under it. The
	// bytes returned are the line's own.
	Shown func([]byte) []byte
}

// Match reports whether line, without its newline, matches Grep as the
// reader is shown it (see Shown).
func (f Filter) Match(line []byte) bool {
	if f.Shown != nil {
		line = f.Shown(line)
	}
	return f.Grep.Match(line)
}

// MaxGrepLine is the longest line a Grep filter examines whole. Of a
// longer line, a forward read (ReadRange, ReadLines) tests and returns its
// first MaxGrepLine bytes and a tail (Tail, TailLines) its last
// MaxGrepLine bytes; the page counts such lines in CutLines and says
// Truncated. Without the bound, one line without a newline (a progress
// bar, a binary blob) made a filtered read hold and match the whole of it.
const MaxGrepLine = 1 << 20

// Page is the result of a read. Offsets are absolute in the job's combined
// output; line numbers are 0-based newline counts (see the package doc).
type Page struct {
	// Data holds the bytes read, or the matching lines when filtering with
	// Grep (each with its newline, the last maybe without).
	Data []byte
	// Start and End are the absolute offsets covered, [Start, End). With a
	// filter, the range examined.
	Start, End int64
	// LinesBefore is the number of newlines before Start (so the 0-based
	// number of the line Start is in; the Go package's Output.FirstLine
	// is that line counted from 1); Lines the number of newlines in
	// [Start, End).
	LinesBefore, Lines int64
	// NextOffset is where a following read continues (End).
	NextOffset int64
	// TotalBytes and TotalLines are the job's output so far (bytes
	// produced, newlines produced), stored or not.
	TotalBytes, TotalLines int64
	// EvictedBytes counts the bytes the output cap or a clear removed from
	// the whole job.
	EvictedBytes int64
	// DroppedBytes counts the bytes the database could not take.
	DroppedBytes int64
	// Gap counts the bytes inside [Start, End) that are not stored (evicted,
	// cleared or dropped): the read crossed a gap when it is not 0.
	Gap int64
	// Matches counts the lines Grep matched.
	Matches int64
	// CutLines counts the lines longer than MaxGrepLine that Grep examined
	// only in part.
	CutLines int64
	// More reports output after End.
	More bool
	// Truncated reports that a limit (the caller's, MaxLimit or ScanLimit)
	// ended the read before it reached what was asked for.
	Truncated bool
}

// again runs read, and again while it meets a chunk whose bytes were
// deleted from the output data file after it read the chunk's row
// (db.ErrOutputDataGone: evicted, cleared or swept in between), at most
// readAttempts times in all. Every try after the first holds a snapshot of
// the output data file taken before its snapshot of the database
// (db.HoldOutput), which has the bytes of every row of the database's
// snapshot that are freed after it; bytes stored after it, the newest
// rows', it reads as the first try does (readTx.outputData). It loses only
// bytes both stored and freed in the moment between its two snapshots.
func again[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := read(ctx)
		if err == nil || i == readAttempts || !errors.Is(err, db.ErrOutputDataGone) {
			return v, err
		}
		ctx = context.WithValue(ctx, holdOutputKey{}, true)
	}
}

// readAttempts bounds again: each try is a fresh pair of snapshots, so the
// bound only matters while a read keeps losing.
const readAttempts = 10

// holdOutputKey marks the context of a read that holds the output data
// file (again).
type holdOutputKey struct{}

// readTx is one read: a snapshot of the job's output.
type readTx struct {
	d     *db.DB
	tx    *sql.Tx
	jobID string
	m     db.OutputCounters // the row's counters, brought up to the newest chunk (see DefaultRowEvery)
	buf   []byte            // the decoded data of the chunk forward hands out
	hold  *db.OutputHold    // the output data file, held from before tx began (again); or nil
}

func beginRead(ctx context.Context, d *db.DB, jobID string) (*readTx, error) {
	r := &readTx{d: d, jobID: jobID}
	if ctx.Value(holdOutputKey{}) != nil {
		h, err := d.HoldOutput(ctx)
		if err != nil {
			return nil, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
		r.hold = h
		if betweenSnapshots != nil {
			betweenSnapshots()
		}
	}
	// ReadOnly makes the driver BEGIN DEFERRED despite _txlock=immediate:
	// readers must not queue for the write lock.
	tx, err := d.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("begin read: %w", err)
	}
	r.tx = tx
	ok, err := db.ReadOutputCounters(ctx, tx, jobID, &r.m)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("read output of job %s: %w", jobID, err)
	}
	if !ok {
		r.close()
		return nil, fmt.Errorf("read output of job %s: %w", jobID, ErrJobNotFound)
	}
	return r, nil
}

func (r *readTx) close() {
	if r.tx != nil {
		r.tx.Rollback()
	}
	if r.hold != nil {
		r.hold.Release()
	}
}

func (r *readTx) page() Page {
	return Page{TotalBytes: r.m.Bytes, TotalLines: r.m.Lines, EvictedBytes: r.m.Evicted, DroppedBytes: r.m.Dropped}
}

// chunk is one chunk row. data is nil for a chunk of a stream the read
// filters out (only its size is known then).
type chunk struct {
	stream    Stream
	off       int64
	firstLine int64
	lineCount int64
	size      int64
	data      []byte
	from      int64 // absolute offset of data[0]: off, or later when only a suffix was fetched
}

func (c *chunk) end() int64 { return c.off + c.size }

// linesBefore is the number of newlines before absolute offset pos, which
// lies in [c.from, c.end()].
func (c *chunk) linesBefore(pos int64) int64 {
	switch {
	case pos == c.off:
		return c.firstLine
	case pos == c.end():
		return c.firstLine + c.lineCount
	case c.from == c.off:
		return c.firstLine + int64(bytes.Count(c.data[:pos-c.off], newline))
	}
	return c.firstLine + c.lineCount - int64(bytes.Count(c.data[pos-c.from:], newline))
}

// chunkColumns are a chunk's columns before its data: its size is that of
// the output it holds, packed tells data stored compressed (codec.go), and
// data_ref names its row in the output data file when its bytes are there
// (db.OutputPath).
const chunkColumns = `stream, byte_offset, first_line, line_count, ` + db.ChunkSize + `,
	size IS NOT NULL AND data_ref IS NULL, data_ref`

// Set by tests: betweenSnapshots runs after a read took its hold of the
// output data file and before its snapshot of the database;
// beforeOutputData runs before each read of the output data file, told
// whether the read holds it.
var (
	betweenSnapshots func()
	beforeOutputData func(held bool)
)

// outputData appends to dst the bytes of the chunk stored under ref in the
// output data file. The chunk rows were read first, so their bytes are
// there unless freed since (db.ErrOutputDataGone). A read that holds the
// file finds there the bytes stored before its hold began; those stored
// after, it reads now.
func (r *readTx) outputData(ctx context.Context, ref int64, dst []byte) ([]byte, error) {
	if beforeOutputData != nil {
		beforeOutputData(r.hold != nil)
	}
	if r.hold != nil {
		b, err := r.hold.Read(ctx, ref, dst)
		if !errors.Is(err, db.ErrOutputDataGone) {
			return b, err
		}
	}
	o, err := r.d.Output(ctx, false)
	if err != nil {
		return dst, err
	}
	return db.ReadOutputData(ctx, o, ref, dst)
}

// forward calls fn with the chunks from the one holding offset from (or the
// first after it) onwards, in order, until fn returns false. c.data is only
// valid during the call. The data of chunks of other streams than only
// ("" = all) is not fetched, except that of the first chunk.
func (r *readTx) forward(ctx context.Context, from int64, only Stream, fn func(c *chunk) bool) error {
	const q = `SELECT ` + chunkColumns + `, ?3 = '' OR stream = ?3 OR byte_offset <= ?2,
		CASE WHEN ?3 = '' OR stream = ?3 OR byte_offset <= ?2 THEN data END
		FROM chunks
		WHERE job_id = ?1 AND byte_offset >= coalesce((SELECT byte_offset FROM chunks
			WHERE job_id = ?1 AND byte_offset <= ?2 ORDER BY byte_offset DESC LIMIT 1), 0)
		ORDER BY byte_offset`
	rows, err := r.tx.QueryContext(ctx, q, r.jobID, from, string(only))
	if err != nil {
		return fmt.Errorf("read chunks: %w", err)
	}
	defer rows.Close()
	var c chunk
	var data sql.RawBytes // scanned without a copy; valid until Next
	var packed, wanted bool
	var ref sql.NullInt64
	for rows.Next() {
		if err := rows.Scan(&c.stream, &c.off, &c.firstLine, &c.lineCount, &c.size, &packed, &ref, &wanted, &data); err != nil {
			return fmt.Errorf("read chunks: %w", err)
		}
		c.data, c.from = data, c.off
		switch {
		case !wanted:
			c.data = nil
		case ref.Valid:
			if r.buf, err = r.outputData(ctx, ref.Int64, r.buf[:0]); err != nil {
				return fmt.Errorf("read chunk at %d: %w", c.off, err)
			}
			c.data = r.buf
		case packed:
			if r.buf, err = decodeChunk(r.buf[:0], data, c.size); err != nil {
				return fmt.Errorf("read chunk at %d: %w", c.off, err)
			}
			c.data = r.buf
		}
		if wanted && int64(len(c.data)) != c.size {
			return fmt.Errorf("read chunk at %d: %d bytes stored, its row says %d", c.off, len(c.data), c.size)
		}
		if c.data == nil && c.size == 0 {
			c.data = []byte{}
		}
		if !fn(&c) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read chunks: %w", err)
	}
	return nil
}

// lineStart returns the offset of a chunk from which scanning finds the start
// of line `line`: the newest chunk with fewer newlines before it, or 0.
func (r *readTx) lineStart(ctx context.Context, line int64) (int64, error) {
	// chunks_line is (job_id, first_line) and ends in the rowid, which
	// grows with byte_offset within a job, so this is one index seek even
	// when many chunks share a first_line (output without newlines).
	const q = `SELECT byte_offset FROM chunks WHERE job_id = ? AND first_line < ?
		ORDER BY first_line DESC, rowid DESC LIMIT 1`
	var off int64
	err := r.tx.QueryRowContext(ctx, q, r.jobID, line).Scan(&off)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find line %d: %w", line, err)
	}
	return off, nil
}

// reader reads forward from a start position, under a limit on the bytes
// it returns, and fills a Page.
type reader struct {
	f     Filter
	limit int
	total int64

	seeking  bool  // looking for the start of line seekLine
	seekLine int64 // line to start at while seeking
	endLine  int64 // stop after this many newlines before pos; -1 = no line bound

	started   bool
	start     int64
	firstLine int64
	pos       int64 // absolute offset reached
	line      int64 // newlines before pos
	gap       int64
	scanned   int64
	out       []byte
	matches   int64
	truncated bool
	done      bool // stopped before the end of the output

	// grep: the current line of filtered bytes (its first MaxGrepLine),
	// where it started, and whether it was longer
	cur          []byte
	curStart     int64
	curStartLine int64
	curCut       bool
	cutLines     int64
}

// begin fixes the start of the page at pos.
func (rd *reader) begin() {
	rd.started, rd.start, rd.firstLine = true, rd.pos, rd.line
	rd.curStart, rd.curStartLine = rd.pos, rd.line
}

// chunk consumes c and reports whether to go on.
func (rd *reader) chunk(c *chunk) bool {
	if c.end() <= rd.pos {
		return true // the chunk before a start that lies in a gap
	}
	switch {
	case rd.seeking:
		// pos is at or before c.off here: scanning starts at a chunk.
		rd.pos, rd.line = c.off, c.firstLine
		if need := rd.seekLine - c.firstLine; need > 0 {
			if c.lineCount < need {
				rd.pos, rd.line = c.end(), c.firstLine+c.lineCount
				return true
			}
			rd.pos += int64(nthIndex(c.data, need) + 1)
			rd.line = rd.seekLine
		} // else the line began in a gap before c: start at c
		rd.seeking = false
		rd.begin()
	case !rd.started:
		if c.off > rd.pos {
			rd.line = c.firstLine // inside a gap: the line of the first stored byte
		} else {
			rd.line = c.linesBefore(rd.pos)
		}
		rd.begin()
	}
	if c.off > rd.pos { // a gap: evicted, cleared or dropped bytes
		rd.gap += c.off - rd.pos
		rd.pos, rd.line = c.off, c.firstLine
	}
	lo := rd.pos - c.off
	hi := c.size
	if rd.endLine >= 0 && c.firstLine+c.lineCount >= rd.endLine {
		hi = lo // the last line ended before: nothing more
		if i := nthIndex(c.data[lo:], rd.endLine-rd.line); i >= 0 {
			hi = lo + int64(i) + 1
		}
		rd.done = true
	}
	keep := rd.f.Stream == "" || c.stream == rd.f.Stream
	switch {
	case keep && rd.f.Grep == nil:
		room := int64(rd.limit - len(rd.out))
		if hi-lo > room {
			hi, rd.truncated, rd.done = lo+room, true, true
		}
		rd.out = append(rd.out, c.data[lo:hi]...)
	case keep:
		if full, at, line := rd.grep(c.data[lo:hi], c.off+lo); full {
			rd.pos, rd.line = at, line
			rd.truncated, rd.done = true, true
			return false
		}
	}
	if hi == c.size {
		rd.line = c.firstLine + c.lineCount
	} else {
		rd.line += int64(bytes.Count(c.data[lo:hi], newline))
	}
	rd.scanned += hi - lo
	rd.pos = c.off + hi
	if rd.done {
		return false
	}
	if (rd.f.Stream != "" || rd.f.Grep != nil) && rd.scanned >= ScanLimit && rd.pos < rd.total {
		rd.truncated, rd.done = true, true
		if len(rd.cur) > 0 { // resume at the start of the unfinished line
			rd.pos, rd.line = rd.curStart, rd.curStartLine
			if rd.curCut {
				rd.cutLines++ // examined in part already
			}
		}
		return false
	}
	return true
}

// grep feeds seg, kept bytes starting at absolute offset at (rd.line
// newlines before it), to the line matcher. When the output is full it
// returns true and the offset and line number of the line that did not fit.
func (rd *reader) grep(seg []byte, at int64) (bool, int64, int64) {
	ln := rd.line
	for len(seg) > 0 {
		if len(rd.cur) == 0 {
			rd.curStart, rd.curStartLine = at, ln
		}
		i := bytes.IndexByte(seg, '\n')
		if i < 0 {
			rd.keepLine(seg)
			return false, 0, 0
		}
		line := seg[:i+1]
		if len(rd.cur) > 0 || rd.curCut || len(line) > MaxGrepLine {
			rd.keepLine(line)
			line = rd.cur
		}
		if !rd.match(line) {
			return true, rd.curStart, rd.curStartLine
		}
		rd.closeLine()
		seg, at, ln = seg[i+1:], at+int64(i+1), ln+1
	}
	return false, 0, 0
}

// keepLine adds b to the current line, up to MaxGrepLine bytes.
func (rd *reader) keepLine(b []byte) {
	room := MaxGrepLine - len(rd.cur)
	if len(b) > room {
		b, rd.curCut = b[:room], true
	}
	rd.cur = append(rd.cur, b...)
}

// closeLine forgets the current line, counting it when it was cut.
func (rd *reader) closeLine() {
	if rd.curCut {
		rd.cutLines++
		rd.truncated = true
	}
	rd.cur, rd.curCut = rd.cur[:0], false
}

// match tests one line and keeps it when it matches; false means the output
// is full and line was not taken.
func (rd *reader) match(line []byte) bool {
	if !rd.f.Match(bytes.TrimSuffix(line, newline)) {
		return true
	}
	if len(rd.out)+len(line) > rd.limit {
		if len(rd.out) > 0 {
			return false
		}
		line = line[:rd.limit] // a single line longer than the limit
		rd.truncated = true
	}
	rd.out = append(rd.out, line...)
	rd.matches++
	return true
}

// finish closes the page at the end of the output unless the read stopped
// earlier.
func (rd *reader) finish(m db.OutputCounters) {
	if !rd.started { // no stored byte at or after the start
		rd.pos, rd.line = min(rd.pos, m.Bytes), m.Lines
		rd.begin()
	}
	if !rd.done {
		if rd.pos < m.Bytes { // a gap at the end
			rd.gap += m.Bytes - rd.pos
			rd.pos, rd.line = m.Bytes, m.Lines
		}
		if rd.f.Grep != nil && len(rd.cur) > 0 { // the unterminated last line
			if !rd.match(rd.cur) {
				rd.pos, rd.line = rd.curStart, rd.curStartLine
				rd.truncated, rd.done = true, true
			} else {
				rd.closeLine()
			}
			rd.cur = rd.cur[:0]
		}
	}
}

func (rd *reader) fill(p *Page) {
	p.Data = rd.out
	if p.Data == nil {
		p.Data = []byte{}
	}
	p.Start, p.End, p.NextOffset = rd.start, rd.pos, rd.pos
	p.LinesBefore, p.Lines = rd.firstLine, rd.line-rd.firstLine
	p.Gap, p.Matches, p.CutLines = rd.gap, rd.matches, rd.cutLines
	p.More = rd.pos < p.TotalBytes
	p.Truncated = rd.truncated
}

// nthIndex returns the index of the n-th (1-based) newline in b, or -1.
func nthIndex(b []byte, n int64) int {
	if n <= 0 {
		return -1
	}
	off := 0
	for {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
		if n--; n == 0 {
			return off - 1
		}
	}
}

// clampLimit applies DefaultLimit and MaxLimit to a requested limit.
func clampLimit(limit int64) (int, bool) {
	switch {
	case limit == 0:
		return DefaultLimit, false
	case limit > MaxLimit:
		return MaxLimit, true
	}
	return int(limit), false
}

// ReadRange reads the job's output from absolute offset on, returning at
// most limit bytes (DefaultLimit when 0, MaxLimit at most): with f.Stream,
// limit counts the bytes of that stream; with f.Grep, the bytes of matching
// lines, and only whole lines are taken. An offset past the end reads
// nothing at the end. It returns an error wrapping ErrJobNotFound when the job
// does not exist.
func ReadRange(ctx context.Context, d *db.DB, jobID string, offset, limit int64, f Filter) (Page, error) {
	return again(ctx, func(ctx context.Context) (Page, error) { return readRange(ctx, d, jobID, offset, limit, f) })
}

func readRange(ctx context.Context, d *db.DB, jobID string, offset, limit int64, f Filter) (Page, error) {
	if offset < 0 || limit < 0 {
		return Page{}, fmt.Errorf("read output: negative offset %d or limit %d", offset, limit)
	}
	if f.Stream != "" && !f.Stream.Valid() {
		return Page{}, fmt.Errorf("read output: invalid stream %q", f.Stream)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return Page{}, err
	}
	defer r.close()
	p := r.page()
	n, clamped := clampLimit(limit)
	rd := &reader{f: f, limit: n, total: r.m.Bytes, endLine: -1, pos: min(offset, r.m.Bytes)}
	if f.Grep == nil {
		rd.out = make([]byte, 0, min(int64(n), r.m.Bytes-rd.pos))
	}
	if rd.pos < r.m.Bytes {
		if err := r.forward(ctx, rd.pos, f.Stream, rd.chunk); err != nil {
			return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
	}
	rd.finish(r.m)
	rd.fill(&p)
	p.Truncated = p.Truncated || (clamped && p.More)
	return p, nil
}

// ReadLines reads n lines of the job's output starting at line from (both
// 0-based; line k follows the k-th newline). n == 0 reads to the end. The
// bytes returned are bounded by MaxLimit (DefaultLimit when n == 0); a read
// cut by that bound ends mid-line and says Truncated. With f.Stream, line
// numbers count that stream's lines (see readStreamLines). A line that begins in an
// evicted gap starts the page at the first stored byte after it (LinesBefore
// says which line that is).
func ReadLines(ctx context.Context, d *db.DB, jobID string, from, n int64, f Filter) (Page, error) {
	return again(ctx, func(ctx context.Context) (Page, error) { return readLines(ctx, d, jobID, from, n, f) })
}

func readLines(ctx context.Context, d *db.DB, jobID string, from, n int64, f Filter) (Page, error) {
	if from < 0 || n < 0 {
		return Page{}, fmt.Errorf("read output lines: negative line %d or count %d", from, n)
	}
	if f.Stream != "" && !f.Stream.Valid() {
		return Page{}, fmt.Errorf("read output lines: invalid stream %q", f.Stream)
	}
	if f.Stream != "" {
		return readStreamLines(ctx, d, jobID, from, n, f)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return Page{}, err
	}
	defer r.close()
	p := r.page()
	limit := MaxLimit
	if n == 0 {
		limit = DefaultLimit
	}
	rd := &reader{f: f, limit: limit, total: r.m.Bytes, endLine: -1}
	if n > 0 {
		rd.endLine = from + n
	}
	switch {
	case from > r.m.Lines:
		rd.pos = r.m.Bytes
	case from == 0:
		rd.pos = 0
	default:
		rd.seeking, rd.seekLine = true, from
		if rd.pos, err = r.lineStart(ctx, from); err != nil {
			return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
	}
	if rd.pos < r.m.Bytes {
		// Line bounds need the newlines of every stream: fetch all data.
		if err := r.forward(ctx, rd.pos, "", rd.chunk); err != nil {
			return Page{}, fmt.Errorf("read output of job %s: %w", jobID, err)
		}
	}
	rd.seeking = false
	rd.finish(r.m)
	rd.fill(&p)
	return p, nil
}

// Tail reads the last n bytes or characters (unit) of the job's output; n ==
// 0 means DefaultLimit, and at most MaxLimit are returned. With Chars the
// page never starts inside a UTF-8 character. With f.Stream, the last n of
// that stream; with f.Grep, the last n of the matching lines.
func Tail(ctx context.Context, d *db.DB, jobID string, n int64, unit Unit, f Filter) (Page, error) {
	if n < 0 {
		return Page{}, fmt.Errorf("tail output: negative count %d", n)
	}
	if unit != Bytes && unit != Chars {
		return Page{}, fmt.Errorf("tail output: invalid unit %d", unit)
	}
	return tail(ctx, d, jobID, n, unit, false, f)
}

// TailLines reads the last n lines of the job's output, counting a final
// unterminated line as a line, like tail -n. n == 0 reads the whole lines in
// the last DefaultLimit bytes. At most MaxLimit bytes are returned.
func TailLines(ctx context.Context, d *db.DB, jobID string, n int64, f Filter) (Page, error) {
	if n < 0 {
		return Page{}, fmt.Errorf("tail output lines: negative count %d", n)
	}
	return tail(ctx, d, jobID, n, Bytes, true, f)
}

// backward walks the chunks from the end of the output to its start.
type backward struct {
	r      *readTx
	ctx    context.Context
	rows   *sql.Rows
	suffix int64
	err    error
	eof    bool
}

// backward walks the chunks from the end. With suffix > 0 only the last
// suffix bytes of each chunk are kept, and only those are fetched of a chunk
// stored as is: a tail of n bytes never needs more of any chunk, and a chunk
// is 64 KiB where a tail is typically 500 bytes. A compressed chunk
// is fetched and decoded whole.
func (r *readTx) backward(ctx context.Context, only Stream, suffix int64) (*backward, error) {
	const q = `SELECT ` + chunkColumns + `, ?2 = '' OR stream = ?2,
		CASE WHEN ?2 = '' OR stream = ?2 THEN (CASE WHEN ?3 > 0 AND size IS NULL THEN substr(data, -?3) ELSE data END) END
		FROM chunks WHERE job_id = ?1 ORDER BY byte_offset DESC`
	rows, err := r.tx.QueryContext(ctx, q, r.jobID, string(only), suffix)
	if err != nil {
		return nil, fmt.Errorf("read chunks: %w", err)
	}
	return &backward{r: r, ctx: ctx, rows: rows, suffix: suffix}, nil
}

// next returns the previous chunk, with a copy of its data, or nil at the
// start of the output.
func (b *backward) next() *chunk {
	if b.eof {
		return nil
	}
	if !b.rows.Next() {
		b.eof, b.err = true, b.rows.Err()
		return nil
	}
	c := &chunk{}
	var packed, wanted bool
	var ref sql.NullInt64
	if err := b.rows.Scan(&c.stream, &c.off, &c.firstLine, &c.lineCount, &c.size, &packed, &ref, &wanted, &c.data); err != nil {
		b.eof, b.err = true, err
		return nil
	}
	var data []byte
	var err error
	switch {
	case !wanted:
		c.data = nil
	case ref.Valid:
		data, err = b.r.outputData(b.ctx, ref.Int64, nil)
	case packed:
		data, err = decodeChunk(nil, c.data, c.size)
	}
	if err != nil {
		b.eof, b.err = true, fmt.Errorf("read chunk at %d: %w", c.off, err)
		return nil
	}
	if data != nil {
		if b.suffix > 0 && int64(len(data)) > b.suffix {
			data = data[int64(len(data))-b.suffix:]
		}
		c.data = data
	}
	c.from = c.end() - int64(len(c.data))
	return c
}

// tailWindow is the kept bytes of the chunks collected from the end, in
// order, with their absolute offsets.
type tailWindow struct {
	chunks []*chunk // newest first
	kept   int64    // bytes of kept chunks
	nl     int64    // newlines in kept chunks
	all    bool     // the window reaches the start of the output
	buf    []byte
	segs   []segment
}

type segment struct {
	abs int64 // absolute offset of buf[at]
	at  int   // index in buf
}

// build concatenates the kept chunks in order.
func (w *tailWindow) build() {
	w.segs = w.segs[:0]
	if c := w.chunks; len(c) == 1 && c[0].data != nil { // the usual tail: no copy
		w.buf = c[0].data
		w.segs = append(w.segs, segment{abs: c[0].from, at: 0})
		return
	}
	w.buf = make([]byte, 0, w.kept)
	for i := len(w.chunks) - 1; i >= 0; i-- {
		if c := w.chunks[i]; len(c.data) > 0 {
			w.segs = append(w.segs, segment{abs: c.from, at: len(w.buf)})
			w.buf = append(w.buf, c.data...)
		}
	}
}

// abs maps an index in buf to its absolute offset; len(buf) maps to total.
func (w *tailWindow) abs(i int, total int64) int64 {
	if i >= len(w.buf) {
		return total
	}
	k := sort.Search(len(w.segs), func(k int) bool { return w.segs[k].at > i }) - 1
	return w.segs[k].abs + int64(i-w.segs[k].at)
}

func tail(ctx context.Context, d *db.DB, jobID string, n int64, unit Unit, lines bool, f Filter) (Page, error) {
	return again(ctx, func(ctx context.Context) (Page, error) { return tailOnce(ctx, d, jobID, n, unit, lines, f) })
}

func tailOnce(ctx context.Context, d *db.DB, jobID string, n int64, unit Unit, lines bool, f Filter) (Page, error) {
	if f.Stream != "" && !f.Stream.Valid() {
		return Page{}, fmt.Errorf("tail output: invalid stream %q", f.Stream)
	}
	r, err := beginRead(ctx, d, jobID)
	if err != nil {
		return Page{}, err
	}
	defer r.close()
	p := r.page()

	clamped, wholeLines := false, lines && n == 0
	if n == 0 {
		n = DefaultLimit
	} else if !lines && n > MaxLimit {
		n, clamped = MaxLimit, true
	}
	// need is how many kept bytes to collect before looking.
	need := n
	switch {
	case lines || f.Grep != nil:
		need = min(DefaultLimit, ScanLimit)
	case unit == Chars:
		need = 4*n + utf8.UTFMax // n characters take at most 4n bytes
	}
	budget := int64(ScanLimit)
	if f.Stream == "" && f.Grep == nil && !lines {
		budget = need
	}

	var suffix int64 // fetch only what a byte or character tail can use
	if !lines && f.Grep == nil {
		suffix = need
	}
	back, err := r.backward(ctx, f.Stream, suffix)
	if err != nil {
		return Page{}, fmt.Errorf("tail output of job %s: %w", jobID, err)
	}
	defer back.rows.Close()

	w := &tailWindow{}
	var scanned int64
	var sel selection
	for {
		for !w.all && w.kept < need && scanned < budget {
			c := back.next()
			if c == nil {
				if back.err != nil {
					return Page{}, fmt.Errorf("tail output of job %s: %w", jobID, back.err)
				}
				w.all = true
				break
			}
			w.chunks = append(w.chunks, c)
			scanned += c.size
			if c.data != nil {
				w.kept += int64(len(c.data))
				w.nl += c.lineCount
			}
			if lines && f.Grep == nil && w.nl > n {
				break // enough lines: n+1 newlines bound the last n
			}
		}
		w.build()
		var ok bool
		var match func([]byte) bool
		if f.Grep != nil {
			match = f.Match
		}
		sel, ok = selectTail(w, n, unit, lines, match, wholeLines)
		if ok || w.all || scanned >= budget || suffix > 0 { // suffixes cannot grow
			if !ok && !w.all {
				sel.truncated = true
			}
			break
		}
		need *= 2
	}

	// Fill the page from the selection.
	start := w.abs(sel.from, r.m.Bytes)
	if sel.startAbs >= 0 {
		start = sel.startAbs
	}
	p.Data = sel.data
	if p.Data == nil {
		p.Data = []byte{}
	}
	if len(p.Data) > MaxLimit { // lines or matches beyond the bound
		cut := len(p.Data) - MaxLimit
		for cut < len(p.Data) && !utf8.RuneStart(p.Data[cut]) && cut-(len(p.Data)-MaxLimit) < utf8.UTFMax-1 {
			cut++
		}
		if sel.startAbs < 0 {
			start = w.abs(sel.from+cut, r.m.Bytes)
		}
		p.Data = p.Data[cut:]
		sel.truncated = true
	}
	p.Start, p.End, p.NextOffset = start, r.m.Bytes, r.m.Bytes
	// Walk the collected chunks from the newest back to start, adding up
	// the gaps between them and finding the line at start.
	p.LinesBefore = r.m.Lines
	prev := r.m.Bytes // start of the newer stored bytes
	for _, c := range w.chunks {
		if c.end() <= start { // start lies in the gap after c, or at its end
			break
		}
		p.Gap += prev - c.end()
		prev = c.off
		if c.off <= start {
			p.LinesBefore = c.linesBefore(start)
			prev = start
			break
		}
		p.LinesBefore = c.firstLine
	}
	p.Gap += max(prev-start, 0)
	p.Lines = r.m.Lines - p.LinesBefore
	p.Matches, p.CutLines = sel.matches, sel.cutLines
	p.Truncated = sel.truncated || (clamped && start > 0)
	return p, nil
}

// selection is what selectTail chose from a window.
type selection struct {
	from      int   // index in the window's buf where the page starts
	startAbs  int64 // absolute start when known otherwise (grep), else -1
	data      []byte
	matches   int64
	cutLines  int64
	truncated bool
}

// selectTail picks the last n units from the window. It reports false when
// the window may be too short to know.
func selectTail(w *tailWindow, n int64, unit Unit, lines bool, match func([]byte) bool, wholeLines bool) (selection, bool) {
	buf := w.buf
	sel := selection{startAbs: -1}
	if match != nil {
		return selectGrep(w, n, unit, lines, match)
	}
	switch {
	case wholeLines: // TailLines(0): the whole lines of the last DefaultLimit bytes
		from := max(0, len(buf)-DefaultLimit)
		if from > 0 || !w.all {
			if i := bytes.IndexByte(buf[from:], '\n'); i >= 0 && from+i+1 < len(buf) {
				from += i + 1
			}
		}
		sel.from = from
		sel.data = buf[from:]
		return sel, true
	case lines:
		k := len(buf)
		if k > 0 && buf[k-1] == '\n' {
			k--
		}
		for i := int64(0); i < n; i++ {
			j := bytes.LastIndexByte(buf[:k], '\n')
			if j < 0 {
				sel.data = buf
				return sel, w.all
			}
			k = j
		}
		sel.from = k + 1
	case unit == Chars:
		// n characters take at most 4n bytes; decoding from a few bytes
		// earlier finds the true boundaries (see charStart).
		win := max(0, len(buf)-int(4*n+utf8.UTFMax))
		sel.from = win + charStart(buf[win:], n)
		if sel.from == 0 && !w.all && len(buf) > 0 {
			return sel, false
		}
	default:
		sel.from = max(0, len(buf)-int(n))
		if sel.from == 0 && int64(len(buf)) < n && !w.all {
			sel.data = buf
			return sel, false
		}
	}
	sel.data = buf[sel.from:]
	return sel, true
}

// charStart returns the index in b where its last n characters begin,
// decoding forward from the start of b: a continuation byte cut from its
// lead byte counts as one character, and from the first lead byte on the
// boundaries are the true ones.
func charStart(b []byte, n int64) int {
	var count int64
	for i := 0; i < len(b); {
		_, size := utf8.DecodeRune(b[i:])
		i += size
		count++
	}
	skip := count - n
	i := 0
	for ; skip > 0 && i < len(b); skip-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}

// selectGrep matches the whole lines of the window and keeps the last n
// units of the matching lines. Of a line longer than MaxGrepLine, only its
// last MaxGrepLine bytes are matched and kept; the window need not reach
// back to its start.
func selectGrep(w *tailWindow, n int64, unit Unit, lines bool, matches func([]byte) bool) (selection, bool) {
	buf := w.buf
	sel := selection{startAbs: -1}
	begin := 0
	firstCut := false // the first line started before the window
	if !w.all {
		i := bytes.IndexByte(buf, '\n')
		switch {
		case i >= MaxGrepLine || i < 0 && len(buf) >= MaxGrepLine:
			firstCut = true // long enough to be cut wherever it started
		case i < 0:
			return sel, false
		default:
			begin = i + 1
		}
	}
	type match struct{ at, end int }
	var ms []match
	var size int
	for at := begin; at < len(buf); {
		end := len(buf)
		if i := bytes.IndexByte(buf[at:], '\n'); i >= 0 {
			end = at + i + 1
		}
		from := at
		if end-at > MaxGrepLine || at == 0 && firstCut {
			from = max(at, end-MaxGrepLine)
			sel.cutLines++
		}
		if matches(bytes.TrimSuffix(buf[from:end], newline)) {
			ms = append(ms, match{from, end})
			size += end - from
		}
		at = end
	}
	sel.truncated = sel.cutLines > 0
	// Keep matches from the newest back until n units are reached.
	var units int64
	k := len(ms)
	for k > 0 && units < n {
		k--
		m := ms[k]
		switch {
		case lines:
			units++
		case unit == Chars:
			units += int64(utf8.RuneCount(buf[m.at:m.end]))
		default:
			units += int64(m.end - m.at)
		}
	}
	if units < n && !w.all {
		return sel, false
	}
	var out []byte
	for _, m := range ms[k:] {
		out = append(out, buf[m.at:m.end]...)
	}
	sel.matches = int64(len(ms) - k)
	if k < len(ms) {
		sel.from = ms[k].at
	} else {
		sel.from = len(buf)
	}
	if !lines && units > n { // cut the oldest match to n units
		cut := len(out) - int(n)
		if unit == Chars {
			cut = charStart(out, n)
		}
		out = out[cut:]
		sel.from += cut // inside the oldest match kept
	}
	sel.data = out
	return sel, true
}
