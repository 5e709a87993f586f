package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// MaxGrepLine is the longest line a grep examines whole: of a longer
// line, a forward read tests and returns its first MaxGrepLine bytes, a
// tail its last MaxGrepLine bytes, and the result says Truncated.
const MaxGrepLine = logs.MaxGrepLine

// find resolves ref in the client's scope. When the job looks alive it
// first checks that its supervisor is: a dead one's jobs become lost here,
// as whoever notices must (see noticeLost).
func (c *Client) find(ctx context.Context, ref string) (db.Job, error) {
	if ref == "" {
		return db.Job{}, fmt.Errorf("%w: missing job id", ErrInvalid)
	}
	j, err := c.db.FindJob(ctx, c.opts.Scope, ref)
	if err != nil {
		return db.Job{}, publicErr(ref, err)
	}
	if !j.Status.Terminal() && !c.readOnly() {
		if n, _ := c.noticeLost(ctx); n > 0 {
			if j2, err := c.db.FindJobByID(ctx, j.ID); err == nil {
				j = j2
			}
		}
	}
	return j, nil
}

// view converts a job and adds what only the live processes can tell.
func (c *Client) view(j db.Job) Job { return c.viewFull(j, true) }

func (c *Client) viewFull(j db.Job, full bool) Job {
	out, gone := c.live(j, full)
	if gone {
		c.markGone(j.ID)
	}
	return out
}

// live converts a job and adds what only the live processes can tell;
// gone reports that the finished job's last processes are gone, which
// markGone records (a one-way fact that spares later views the scan).
func (c *Client) live(j db.Job, full bool) (out Job, gone bool) {
	out = fromDB(j, time.Now())
	if c.readOnly() || j.Status == StatusQueued {
		// A queued job has no process yet.
		// The file may come from another host, or be a copy whose
		// processes are not ours: this host's processes say nothing of it.
		return out, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The job's cgroup is looked up only when processes are counted.
	cgroup := func() string { return control.CgroupOf(ctx, c.db, j.ID) }
	return out, addLiveFacts(&out, j, full, cgroup)
}

// markGone records that no process of the finished job id is alive.
func (c *Client) markGone(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.db.MarkSurvivorsGone(ctx, id)
}

// Get returns a job by id, unique id prefix or name, and counts as an
// access for its TTL.
func (c *Client) Get(ctx context.Context, ref string) (Job, error) {
	if err := c.check(ctx); err != nil {
		return Job{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return Job{}, err
	}
	c.touch(ctx, j)
	out := c.view(j)
	c.addPositions(ctx, []Job{out}, func(p int) { out.QueuePosition = p })
	return out, nil
}

// List returns the scope's jobs that f selects, newest first; f.Limit 0
// returns them all.
func (c *Client) List(ctx context.Context, f Filter) ([]Job, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	df, err := c.dbFilter(f)
	if err != nil {
		return nil, err
	}
	_, _ = c.noticeLost(ctx)
	rows, err := c.db.FindJobs(ctx, df)
	if err != nil {
		return nil, err
	}
	out := c.views(rows)
	c.addPositions(ctx, out, nil)
	return out, nil
}

// views converts a listing's rows. The live facts of a running job come
// from its processes' files in /proc, a few dozen reads each; a page of
// running jobs reads them on every processor at once.
func (c *Client) views(rows []db.Job) []Job {
	out := make([]Job, len(rows))
	active := 0
	for _, j := range rows {
		if !j.Status.Terminal() {
			active++
		}
	}
	workers := min(runtime.GOMAXPROCS(0), active)
	if workers < 2 {
		for i, j := range rows {
			out[i] = c.viewFull(j, false)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() { // owned by views, which waits for it
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(rows) {
					return
				}
				out[i] = c.viewFull(rows[i], false)
			}
		}()
	}
	wg.Wait()
	return out
}

// ListPage returns one page of the scope's jobs that f selects, newest
// first: f.Limit of them (DefaultListLimit when 0), how many follow, and
// the cursor of the next page. Its cost does not grow with the history.
func (c *Client) ListPage(ctx context.Context, f Filter) (Page, error) {
	if err := c.check(ctx); err != nil {
		return Page{}, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	df, err := c.dbFilter(f)
	if err != nil {
		return Page{}, err
	}
	_, _ = c.noticeLost(ctx)
	rows, pos, err := c.db.FindJobsPage(ctx, df)
	if err != nil {
		return Page{}, err
	}
	p := Page{Jobs: c.views(rows)}
	c.addPositions(ctx, p.Jobs, nil)
	if pos == nil || len(rows) < df.Limit {
		return p, nil
	}
	rest := df
	rest.After, rest.Limit = pos, MaxMoreCount+1
	if p.More, err = c.db.CountJobs(ctx, rest); err != nil {
		return Page{}, err
	}
	if p.More > MaxMoreCount {
		p.More, p.MoreAtLeast = MaxMoreCount, true
	}
	if p.More > 0 {
		p.Next = encodeCursor(pos)
	}
	return p, nil
}

// dbFilter validates f and turns it into the storage filter.
func (c *Client) dbFilter(f Filter) (db.Filter, error) {
	if f.Limit < 0 {
		return db.Filter{}, fmt.Errorf("%w: limit must not be negative, got %d", ErrInvalid, f.Limit)
	}
	df := db.Filter{Scope: c.opts.Scope, AllScopes: f.AllScopes, Limit: f.Limit, CreatedSince: f.Since,
		NameContains: f.Name, LabelContains: f.Label, CommandContains: f.Command}
	for _, s := range f.Statuses {
		df.Statuses = append(df.Statuses, vocab.Status(s))
	}
	if f.Cursor != "" {
		pos, err := decodeCursor(f.Cursor)
		if err != nil {
			return db.Filter{}, err
		}
		df.After = &pos
	}
	return df, nil
}

// A cursor is a position as text, "<rowid>.<created_at>"; callers treat it
// as opaque.
func encodeCursor(p *db.Position) string {
	return strconv.FormatInt(p.Rowid, 10) + "." + p.CreatedAt
}

func decodeCursor(s string) (db.Position, error) {
	id, at, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(id, 10, 64)
	if _, terr := db.ParseTime(at); !ok || err != nil || n <= 0 || terr != nil {
		if len(s) > 64 {
			s = s[:64] + "…"
		}
		return db.Position{}, fmt.Errorf("%w: bad cursor %q (pass the next_cursor of a listing)", ErrInvalid, s)
	}
	return db.Position{CreatedAt: at, Rowid: n}, nil
}

// History returns a job's events, oldest first.
func (c *Client) History(ctx context.Context, ref string) ([]Event, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	evs, err := c.db.Events(ctx, db.EventFilter{Scope: c.opts.Scope, JobID: j.ID})
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, eventFromDB(e))
	}
	return out, nil
}

func (o PollOptions) chars() int64 {
	if o.Tail > 0 {
		return o.Tail
	}
	return DefaultTailChars
}

// Poll returns a job's state and the tail of its output, cleaned for an
// agent unless o.Raw.
func (c *Client) Poll(ctx context.Context, ref string, o PollOptions) (PollResult, error) {
	if err := c.check(ctx); err != nil {
		return PollResult{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return PollResult{}, err
	}
	f, err := filter("", o.Grep, !o.Raw)
	if err != nil {
		return PollResult{}, err
	}
	view := c.viewConcurrently(j)
	out, err := c.tail(ctx, j.ID, o.chars(), f, !o.Raw)
	v, gone := view()
	if err != nil {
		return PollResult{}, err
	}
	// Recorded once the read succeeded: a read that failed (a damaged
	// page) writes nothing.
	if gone {
		c.markGone(j.ID)
	}
	c.touch(ctx, j)
	return PollResult{Job: v, Output: out, RetryIn: retryIn(v)}, nil
}

// viewConcurrently is live run while the caller reads the database; the
// returned function waits for it. The live facts of a finished job come
// from a scan of every process in /proc (about 2.8 ms of a 9.5 ms poll of
// a job with 1 GiB of output, the tail read about 0.9 ms); they need only
// the job row, so the two overlap. What they found is recorded by the
// caller once its read succeeded (markGone): a read that meets a damaged
// page writes nothing.
func (c *Client) viewConcurrently(j db.Job) func() (Job, bool) {
	type result struct {
		job  Job
		gone bool
	}
	done := make(chan result, 1)
	go func() {
		v, gone := c.live(j, true)
		done <- result{v, gone}
	}()
	return func() (Job, bool) {
		r := <-done
		return r.job, r.gone
	}
}

// touchEvery is how stale a finished job's last access may be before a
// read records a new one. Its TTL counts from its last access (30 min by
// default), so skipping fresher ones moves an expiry by under a second and
// spares a loop of reads a write transaction each.
const touchEvery = time.Second

// touch records a read of a finished job as an access for its TTL, unless
// one was recorded less than touchEvery ago. A running job's reads are not
// recorded: its TTL starts at its end (which sets last_access_at), and the
// write would wait behind the supervisor's output batches while the job
// floods (a poll every second of a job running `yes` took 200 ms now and
// then).
func (c *Client) touch(ctx context.Context, j db.Job) {
	if !j.Status.Terminal() || c.readOnly() {
		return
	}
	if age := c.db.Now().Sub(j.LastAccessAt); age >= 0 && age < touchEvery {
		return
	}
	_ = c.db.Touch(ctx, j.ID)
}

// tail reads the last n characters, starting at a line (see tailStart).
// Cleaning can shrink text a lot (a progress bar redrawn a thousand times
// is one line), so it reads a larger raw window, one character more than
// it may return: that one says whether the window begins a line. The
// offsets and line numbers returned are those of the text returned.
func (c *Client) tail(ctx context.Context, id string, n int64, f logs.Filter, clean bool) (Output, error) {
	window := n
	if clean {
		window = max(n*4, 4096)
	}
	filtered := f.Stream != "" || f.Grep != nil
	if !filtered {
		window++
	}
	p, err := logs.Tail(ctx, c.db, id, window, logs.Chars, f)
	if err != nil {
		return Output{}, err
	}
	if filtered {
		// Selected lines, not a range of the output: the offsets are
		// those of the range examined.
		text := render(p.Data, clean)
		cut := 0
		if int64(utf8.RuneCountInString(text)) > n {
			text, cut = textclean.TailChars(text, int(n))
		}
		out := outputFromPage(id, p, text)
		out.Truncated = out.Truncated || cut > 0
		return out, nil
	}
	from, fromIsLine := 0, true
	if p.Start > 0 && int64(utf8.RuneCount(p.Data)) == window {
		// The first character is the one before the window. (A shorter
		// read reached the first stored byte: the start of the output, or
		// what follows bytes the cap or a clear removed.)
		_, from = utf8.DecodeRune(p.Data)
		fromIsLine = p.Data[0] == '\n'
	}
	pos, text := tailStart(p.Data, from, fromIsLine, n, clean)
	out := outputFromPage(id, p, text)
	c.placeTail(ctx, id, &out, p, p.Data, pos, p.End)
	// Cut short: stored output before the text was left out.
	out.Truncated = out.Truncated || out.Start > max(out.EvictedTotal+out.DroppedTotal-out.Evicted, 0)
	return out, nil
}

// retryIn suggests when to look again: soon after output, slower the
// longer a job has been silent, never for a finished job.
func retryIn(j Job) time.Duration {
	quiet := time.Since(j.CreatedAt)
	if j.LastOutputAt != nil {
		quiet = time.Since(*j.LastOutputAt)
	}
	return vocab.RetryIn(j.Status.Terminal(), quiet, 0)
}

// ReadNew returns output produced since the previous ReadNew of the job and
// advances the job's read cursor (stored in the database) past what it
// returned. It never repeats or skips a byte: when more is pending than
// o.Tail characters, Output.OmittedAfter says how much, and the next call
// continues there.
func (c *Client) ReadNew(ctx context.Context, ref string, o PollOptions) (PollResult, error) {
	if err := c.check(ctx); err != nil {
		return PollResult{}, err
	}
	if err := c.writable(); err != nil {
		return PollResult{}, err // the read cursor is stored
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return PollResult{}, err
	}
	r, err := c.readNew(ctx, ref, j, o)
	if err != nil {
		return PollResult{}, err
	}
	// Recorded once the read succeeded: a read that failed (a damaged
	// page) writes nothing.
	c.touch(ctx, j)
	return r, nil
}

// readNew is ReadNew of the job j found by ref.
func (c *Client) readNew(ctx context.Context, ref string, j db.Job, o PollOptions) (PollResult, error) {
	f, err := filter("", o.Grep, !o.Raw)
	if err != nil {
		return PollResult{}, err
	}
	n := o.chars()
	if o.Newest && f.Grep == nil {
		return c.readNewest(ctx, ref, j, n, o.Raw)
	}
	cur := j
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// Another reader moved the cursor: start from where it is.
			if cur, err = c.db.FindJobByID(ctx, j.ID); err != nil {
				return PollResult{}, publicErr(ref, err)
			}
		}
		from := cur.ReadCursor
		// Characters are at most 4 bytes; read enough bytes for n of them
		// (cleaning only shrinks text, so raw bytes bound the window).
		p, err := logs.ReadRange(ctx, c.db, j.ID, from, n*4, f)
		if err != nil {
			return PollResult{}, err
		}
		data := p.Data
		end := p.End
		if f.Grep == nil {
			data, end = cutChars(p.Data, p.Start, n, p.End)
			if !cur.Status.Terminal() || end < p.TotalBytes {
				// Keep a UTF-8 character whose bytes have not all
				// arrived for the next read.
				data, end = dropPartialRune(data, end)
			}
		}
		ok, err := c.db.AdvanceReadCursor(ctx, j.ID, from, max(end, from))
		if err != nil {
			return PollResult{}, err
		}
		if !ok && attempt < 10 {
			continue // another reader moved the cursor; read again from there
		}
		text := string(data)
		if !o.Raw {
			text = textclean.Clean(data)
		}
		if f.Grep == nil {
			// Lines of what was read but not returned are not this page's.
			p.Lines -= int64(bytes.Count(p.Data[len(data):], []byte{'\n'}))
		}
		p.End = end
		p.NextOffset = end
		out := outputFromPage(j.ID, p, text)
		v := c.view(cur)
		v.ReadCursor = end
		return PollResult{Job: v, Output: out, RetryIn: retryIn(v)}, nil
	}
}

// Segment is a run of one stream's raw output at an absolute offset of
// the job's combined output.
type Segment struct {
	Stream Stream `json:"stream"`
	Offset int64  `json:"offset"`
	Text   string `json:"text"`
}

// Segments reads the raw output in [offset, offset+limit) (limit
// DefaultPageBytes when 0, at most MaxPageBytes) as the runs of one stream
// each that it consists of, in order, each with its offset. A read with
// Range.Stream cannot say where each of its bytes lay; a front end that
// keeps the streams apart and must cut them all at one offset (whole lines
// of stdout and of stderr, as claude-code's bash_output returns them) reads
// them here. The Output gives the range read (Start, End), the totals and
// the evicted bytes inside the range; its Text is empty.
func (c *Client) Segments(ctx context.Context, ref string, offset, limit int64) ([]Segment, Output, error) {
	if err := c.check(ctx); err != nil {
		return nil, Output{}, err
	}
	if offset < 0 || limit < 0 {
		return nil, Output{}, fmt.Errorf("%w: offsets and limits cannot be negative", ErrInvalid)
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return nil, Output{}, err
	}
	if limit == 0 {
		limit = DefaultPageBytes
	}
	segs, p, err := logs.ReadSegments(ctx, c.db, j.ID, offset, min(limit, MaxPageBytes))
	if err != nil {
		return nil, Output{}, err
	}
	c.touch(ctx, j) // once the read succeeded
	out := make([]Segment, len(segs))
	for i, s := range segs {
		out[i] = Segment{Stream: Stream(s.Stream), Offset: s.Offset, Text: string(s.Data)}
	}
	o := outputFromPage(j.ID, p, "")
	o.Truncated = o.Truncated || limit > MaxPageBytes && o.OmittedAfter > 0
	return out, o, nil
}

// MarkRead moves the job's read cursor (where the next ReadNew starts)
// from offset from to offset to, if it is still at from, and reports
// whether it moved: false means another reader moved it first, and the
// caller reads again from where it is now (Job.ReadCursor). It lets a
// front end that cuts new output its own way (whole lines of each stream)
// share the one cursor with ReadNew. to must lie between from and the
// output written so far.
func (c *Client) MarkRead(ctx context.Context, ref string, from, to int64) (bool, error) {
	if err := c.check(ctx); err != nil {
		return false, err
	}
	if err := c.writable(); err != nil {
		return false, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return false, err
	}
	if from < 0 || to < from {
		return false, fmt.Errorf("%w: read cursor cannot move back (%d to %d)", ErrInvalid, from, to)
	}
	if to > j.OutputBytes {
		// The row's counters may lag the newest chunk; the store's do not.
		p, err := logs.ReadRange(ctx, c.db, j.ID, to, 1, logs.Filter{})
		if err != nil {
			return false, err
		}
		if to > p.TotalBytes {
			return false, fmt.Errorf("%w: read cursor %d is past the output (%d bytes)", ErrInvalid, to, p.TotalBytes)
		}
	}
	ok, err := c.db.AdvanceReadCursor(ctx, j.ID, from, to)
	if err != nil {
		return false, publicErr(ref, err)
	}
	return ok, nil
}

// readNewest is ReadNew with PollOptions.Newest: the newest n characters
// of what is new, starting at a line when older new output is skipped, and
// the cursor moved to the end of what it returns.
func (c *Client) readNewest(ctx context.Context, ref string, j db.Job, n int64, raw bool) (PollResult, error) {
	cur := j
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			var err error
			if cur, err = c.db.FindJobByID(ctx, j.ID); err != nil {
				return PollResult{}, publicErr(ref, err)
			}
		}
		from := cur.ReadCursor
		// Cleaning only shrinks text and a character is at most 4 bytes,
		// so this window holds the newest n characters; a redrawn
		// progress bar may need more, as tail reads it (see tail).
		window := n * 4
		if !raw {
			window = max(n*4, 4096)
		}
		start := max(from, cur.OutputBytes-window)
		ctxByte := int64(0)
		if start > from {
			// One byte more, before the window, says whether it begins a
			// line.
			start, ctxByte = start-1, 1
		}
		p, err := logs.ReadRange(ctx, c.db, j.ID, start, window+ctxByte, logs.Filter{})
		if err != nil {
			return PollResult{}, err
		}
		data, end := p.Data, p.End
		if !cur.Status.Terminal() || end < p.TotalBytes {
			data, end = dropPartialRune(data, end)
		}
		first, firstIsLine := 0, true
		if ctxByte > 0 && p.Start == start && len(data) > 0 {
			first, firstIsLine = 1, data[0] == '\n'
		}
		pos, text := tailStart(data, first, firstIsLine, n, !raw)
		ok, err := c.db.AdvanceReadCursor(ctx, j.ID, from, max(end, from))
		if err != nil {
			return PollResult{}, err
		}
		if !ok && attempt < 10 {
			continue
		}
		out := outputFromPage(j.ID, p, text)
		c.placeTail(ctx, j.ID, &out, p, data, pos, end)
		if skipped := out.Start - from; skipped > 0 {
			out.Skipped, out.SkippedFrom = skipped, from
			out.Truncated = true
		}
		v := c.view(cur)
		v.ReadCursor = end
		return PollResult{Job: v, Output: out, RetryIn: retryIn(v)}, nil
	}
}

// cutChars keeps at most n characters of data (which starts at offset
// start) and returns the kept bytes and the offset after them.
func cutChars(data []byte, start, n, end int64) ([]byte, int64) {
	count := int64(0)
	for i := 0; i < len(data); {
		if count == n {
			return data[:i], start + int64(i)
		}
		_, size := utf8.DecodeRune(data[i:])
		i += size
		count++
	}
	return data, end
}

// dropPartialRune holds back an incomplete UTF-8 sequence at the end.
func dropPartialRune(data []byte, end int64) ([]byte, int64) {
	for k := 1; k <= 3 && k <= len(data); k++ {
		b := data[len(data)-k]
		if b < 0x80 {
			return data, end
		}
		if b >= 0xC0 { // a leading byte: is its sequence complete?
			need := 2
			switch {
			case b >= 0xF0:
				need = 4
			case b >= 0xE0:
				need = 3
			}
			if k < need {
				return data[:len(data)-k], end - int64(k)
			}
			return data, end
		}
	}
	return data, end
}

// filter builds the logs.Filter of a read. With clean, grep is matched
// against each line as the cleaned text shows it (the text an agent
// reads), not against the bytes under it.
func filter(stream Stream, grep string, clean bool) (logs.Filter, error) {
	f := logs.Filter{Stream: logs.Stream(stream)}
	switch stream {
	case "", Stdout, Stderr, PTY:
	default:
		return f, fmt.Errorf("%w: unknown stream \"%s\" (use stdout or stderr)", ErrInvalid, echo(string(stream)))
	}
	if grep != "" {
		re, err := regexp.Compile(grep)
		if err != nil {
			return f, fmt.Errorf("%w: bad regular expression \"%s\": %v", ErrInvalid, echo(grep), reErr(err))
		}
		f.Grep = re
		if clean {
			f.Shown = textclean.CleanLine
		}
	}
	return f, nil
}

// reErr shortens regexp's errors, which repeat the pattern.
func reErr(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	return err.Error()
}

// Log reads part of a job's output.
func (c *Client) Log(ctx context.Context, ref string, r Range) (Output, error) {
	return c.log(ctx, ref, r, r.Clean)
}

// log is Log; with cleanMatch, Grep matches the cleaned text of each line
// whether or not the bytes returned are cleaned (Follow cleans them
// itself).
func (c *Client) log(ctx context.Context, ref string, r Range, cleanMatch bool) (Output, error) {
	if err := c.check(ctx); err != nil {
		return Output{}, err
	}
	if r.Offset < 0 || r.Limit < 0 || r.FromLine < 0 || r.Lines < 0 || r.Tail < 0 || r.TailLines < 0 {
		return Output{}, fmt.Errorf("%w: offsets, limits and line counts cannot be negative", ErrInvalid)
	}
	f, err := filter(r.Stream, r.Grep, cleanMatch)
	if err != nil {
		return Output{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return Output{}, err
	}
	var p logs.Page
	switch {
	case r.ByteRange || r.Offset > 0 || r.Limit > 0:
		limit := r.Limit
		if limit == 0 {
			limit = DefaultPageBytes
		}
		truncated := false
		if limit > MaxPageBytes {
			limit, truncated = MaxPageBytes, true
		}
		p, err = logs.ReadRange(ctx, c.db, j.ID, r.Offset, limit, f)
		p.Truncated = p.Truncated || truncated
	case r.FromLine > 0 || r.Lines > 0:
		from := max(r.FromLine, FirstLine)
		n := r.Lines
		if n == 0 {
			n = DefaultLogLines
		}
		p, err = logs.ReadLines(ctx, c.db, j.ID, from-FirstLine, n, f) // the store counts lines from 0
	case r.TailLines > 0:
		p, err = logs.TailLines(ctx, c.db, j.ID, r.TailLines, f)
	default:
		if r.Clean {
			out, err := c.tail(ctx, j.ID, pickTail(r.Tail), f, true)
			if err == nil {
				err = c.ownStreamOutside(ctx, f, &out)
			}
			if err == nil {
				c.touch(ctx, j) // once the reads succeeded
			}
			return out, err
		}
		p, err = logs.Tail(ctx, c.db, j.ID, pickTail(r.Tail), logs.Chars, f)
	}
	if err != nil {
		return Output{}, err
	}
	text := string(p.Data)
	if r.Clean {
		text = textclean.Clean(p.Data)
	}
	out := outputFromPage(j.ID, p, text)
	if err := c.ownStreamOutside(ctx, f, &out); err != nil {
		return out, err
	}
	// Recorded once the reads succeeded: a read that failed (a damaged
	// page) writes nothing.
	c.touch(ctx, j)
	return out, nil
}

// ownStreamOutside clears what a read filtered by stream says lies before
// or after it when none of that stream's output does: the counts are of
// every stream, and "12 B earlier" of stderr that has no earlier byte
// misleads.
func (c *Client) ownStreamOutside(ctx context.Context, f logs.Filter, out *Output) error {
	if f.Stream == "" || (out.OmittedBefore == 0 && out.OmittedAfter == 0) {
		return nil
	}
	before, after, err := logs.StreamOutside(ctx, c.db, out.JobID, f.Stream, out.Start, out.End)
	if err != nil {
		return err
	}
	if !before {
		out.OmittedBefore = 0
	}
	if !after {
		out.OmittedAfter = 0
	}
	return nil
}

func pickTail(n int64) int64 {
	if n > 0 {
		return n
	}
	return DefaultTailChars
}

// noticeLost is the one place where a read writes: it records as lost the
// active jobs of every supervisor that died (its lock is free), through
// sweep.Lost. A read may write that, and only that, because it may be
// the only one left to notice: no supervisor need be alive, and without it
// a job whose supervisor was killed would read running for ever. The
// transition is conditional on the job's status, so readers racing each
// other or a supervisor mark each job once.
//
// It starts nothing: the on_exit hooks of the jobs it marks wait in the
// database for the next supervisor that starts on it, or for a running
// supervisor's janitor, which claim them there and run each once
// (supervisor.Supervisor's sweep). A read-only client records nothing.
func (c *Client) noticeLost(ctx context.Context) (int, error) {
	if c.readOnly() {
		return 0, nil // a read-only audit records nothing it notices
	}
	return sweep.Lost(ctx, c.db, nil)
}

// Hosts tells where the database's jobs ran: the host of each supervisor
// that wrote it, by supervisor id (Job.Supervisor), and the host of the
// newest one, which is the database's own host for events and for jobs
// whose supervisor is not recorded. One database serves one host; an
// audit of several hosts reads each one's database.
func (c *Client) Hosts(ctx context.Context) (map[string]string, string, error) {
	if err := c.check(ctx); err != nil {
		return nil, "", err
	}
	return c.db.Hosts(ctx)
}

// LineMark is what jobs knows of one line of output beyond its text: the
// stream that wrote its end, and when. Output is stored in chunks, each
// holding up to about 1 KiB written close together by one stream and
// stamped with the time of its latest write; At is that time for the
// chunk holding the line's end (its newline, or the last bytes of an
// unfinished last line): the line's own write time, or later by the time
// until the chunk's last write.
type LineMark struct {
	Stream Stream    `json:"stream"`
	At     time.Time `json:"at"`
	// Line is the line's number in the combined output of all streams
	// (from FirstLine), also when the marks are of one stream's lines:
	// stdout's lines of `a` (stdout), `b` (stderr), `c` (stdout) are 1
	// and 3. An unfinished last line has the number of the combined line
	// its bytes begin.
	Line int64 `json:"line"`
}

// LineMarks returns the marks of n lines of job ref's output from line
// fromLine (counted from 1, as Range.FromLine counts: over all streams, or
// within stream alone). Lines no longer stored have none, so the result
// may be shorter than n; an unfinished last line has its mark.
func (c *Client) LineMarks(ctx context.Context, ref string, fromLine, n int64, stream Stream) ([]LineMark, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	f, err := filter(stream, "", false)
	if err != nil {
		return nil, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	ms, err := logs.LineMarks(ctx, c.db, j.ID, max(fromLine, FirstLine)-FirstLine, n, f.Stream)
	if err != nil {
		return nil, publicErr(ref, err)
	}
	out := make([]LineMark, len(ms))
	for i, m := range ms {
		out[i] = LineMark{Stream: Stream(m.Stream), At: m.At, Line: m.Line + FirstLine}
	}
	return out, nil
}
