package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"regexp"
	"slices"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// statusLook is how often a wait that only an end can end looks at its
// jobs without being woken: the bound on noticing a job whose supervisor
// died without recording its end.
const statusLook = 5 * time.Second

// Wait blocks until the jobs finish (or one of them with o.Any), output of
// one of them matches o.Until, all of them have been silent for o.Idle, one
// of them waits for input (o.Input) or has unread output (o.NewOutput), or
// o.Timeout passes. It sleeps while it
// waits: it wakes when the database changes (for a plain wait, when a
// status changes), and at least every few seconds to notice a supervisor
// that died (every second with o.Idle, o.Until or o.NewOutput; four times
// a second with o.Input, which only the kernel can tell).
func (c *Client) Wait(ctx context.Context, refs []string, o WaitOptions) (WaitResult, error) {
	if err := c.check(ctx); err != nil {
		return WaitResult{}, err
	}
	if len(refs) == 0 {
		return WaitResult{}, fmt.Errorf("%w: wait needs at least one job id", ErrInvalid)
	}
	if o.Timeout < 0 || o.Idle < 0 {
		return WaitResult{}, fmt.Errorf("%w: durations cannot be negative", ErrInvalid)
	}
	var until *regexp.Regexp
	if o.Until != "" {
		re, err := regexp.Compile(o.Until)
		if err != nil {
			return WaitResult{}, fmt.Errorf("%w: bad regular expression \"%s\": %v", ErrInvalid, echo(o.Until), reErr(err))
		}
		until = re
	}
	ids := make([]string, len(refs))
	for i, ref := range refs {
		j, err := c.find(ctx, ref)
		if err != nil {
			return WaitResult{}, err
		}
		ids[i] = j.ID
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	w := newWatcher(c.db.Path)
	defer w.Close()
	// Only an end can end a plain wait: it wakes when a status changes,
	// and, to notice a supervisor that died without recording its jobs'
	// end, every statusLook.
	// New output and a job blocking on its stdin change no status: those
	// waits watch every write, and look at the jobs' processes often.
	look := time.Second
	if until == nil && o.Idle == 0 && !o.NewOutput && !o.Input {
		w.watchStatus()
		if o.Progress == nil {
			look = statusLook
		}
	}
	if o.Input {
		look = 250 * time.Millisecond
	}
	scanned := make([]int64, len(ids)) // Until: offset of the next unscanned line
	var lastSeen []jobMark             // the jobs at the previous look
	var inputSince time.Time
	lastProgress := time.Now()
	lastSweep := time.Now()
	for {
		c.looks.Add(1)
		jobs := make([]Job, len(ids))
		rows := make([]db.Job, len(ids))
		for i, id := range ids {
			j, err := c.db.FindJobByID(context.WithoutCancel(ctx), id)
			if err != nil {
				return WaitResult{}, publicErr(refs[i], err)
			}
			rows[i] = j
			if o.Input && j.Status == vocab.StatusRunning {
				jobs[i] = c.viewFull(j, false)
			} else {
				jobs[i] = fromDB(j, time.Now())
			}
		}
		res := WaitResult{Jobs: jobs}
		seen := jobMarks(rows)
		w.Looked(lastSeen == nil || !slices.Equal(seen, lastSeen))
		lastSeen = seen
		if until != nil {
			for i, j := range rows {
				line, next, err := c.scanUntil(ctx, j, scanned[i], until, o.Clean)
				if err != nil {
					if ctx.Err() == context.DeadlineExceeded && o.Timeout > 0 {
						// The bound passed inside a read: that is a
						// timeout like any other, not a failed read.
						res.Reason = WaitTimedOut
						return res, nil
					}
					return res, err
				}
				scanned[i] = next
				if line != "" {
					res.Reason, res.JobID, res.Match = WaitMatched, j.ID, line
					return res, nil
				}
			}
		}
		finished := 0
		for i, j := range jobs {
			if j.Status.Terminal() {
				finished++
				if o.Any && res.JobID == "" {
					res.JobID = jobs[i].ID
				}
			}
		}
		if finished == len(jobs) || (o.Any && finished > 0) {
			res.Reason = WaitExited
			if res.JobID == "" {
				res.JobID = jobs[len(jobs)-1].ID
			}
			return res, nil
		}
		if o.Idle > 0 {
			quiet := time.Duration(1<<63 - 1)
			for _, j := range jobs {
				if j.Status.Terminal() {
					continue
				}
				since := j.CreatedAt
				if j.StartedAt != nil {
					since = *j.StartedAt
				}
				if j.LastOutputAt != nil {
					since = *j.LastOutputAt
				}
				quiet = min(quiet, time.Since(since))
			}
			if quiet >= o.Idle {
				res.Reason = WaitIdle
				for _, j := range jobs {
					if !j.Status.Terminal() {
						res.JobID = j.ID // the first job that went quiet while running
						break
					}
				}
				return res, nil
			}
		}
		if o.NewOutput {
			for _, j := range jobs {
				if j.OutputBytes > j.ReadCursor {
					res.Reason, res.JobID = WaitOutput, j.ID
					return res, nil
				}
			}
		}
		if o.Input {
			// A job blocked on its stdin: the output it wrote just before
			// blocking (the prompt, the answer Until looks for) must be
			// stored before the caller reads it. Its supervisor stores it
			// at once when asked (syncOutput); one that cannot be asked
			// has stored it after a few flushes (inputSettle).
			waiting := -1
			for i, j := range jobs {
				if j.WaitingForInput {
					waiting = i
					break
				}
			}
			switch {
			case waiting < 0:
				inputSince = time.Time{}
			case c.syncOutput(ctx, rows[waiting]):
				if j, err := c.db.FindJobByID(context.WithoutCancel(ctx), rows[waiting].ID); err == nil {
					res.Jobs[waiting] = c.viewFull(j, false)
				}
				res.Reason, res.JobID = WaitInput, rows[waiting].ID
				return res, nil
			case inputSince.IsZero():
				inputSince = time.Now()
			case time.Since(inputSince) >= inputSettle:
				res.Reason, res.JobID = WaitInput, rows[waiting].ID
				return res, nil
			}
		}
		if o.Progress != nil && time.Since(lastProgress) >= time.Second {
			o.Progress(jobs)
			lastProgress = time.Now()
		}
		if time.Since(lastSweep) >= 2*time.Second {
			_, _ = c.noticeLost(ctx)
			lastSweep = time.Now()
		}
		if err := w.Wait(ctx, look); err != nil {
			if ctx.Err() == context.DeadlineExceeded && o.Timeout > 0 {
				res.Reason = WaitTimedOut
				for i, id := range ids {
					if j, err := c.db.FindJobByID(context.WithoutCancel(ctx), id); err == nil {
						res.Jobs[i] = fromDB(j, time.Now())
					}
				}
				return res, nil
			}
			return res, err
		}
	}
}

// jobMark is what a wait's look at a job compares with the previous look
// to tell whether a write was of that job (watcher.Looked).
type jobMark struct {
	status vocab.Status
	output int64
	cursor int64
}

func jobMarks(rows []db.Job) []jobMark {
	out := make([]jobMark, len(rows))
	for i, j := range rows {
		out[i] = jobMark{status: j.Status, output: j.OutputBytes + j.DroppedBytes, cursor: j.ReadCursor}
	}
	return out
}

// inputSettle is how long a job must have been blocked on stdin before
// Wait says so when its supervisor cannot be asked to store its output
// (syncOutput): a few of the supervisor's output flushes.
const inputSettle = 300 * time.Millisecond

// scanUntil looks for re in the lines of j's output from offset from on.
// It returns the first matching line (empty if none) and the offset to
// resume at. A line is matched without its line ending (\n or the \r\n of a
// terminal), so "$" anchors at its end. The last line without a newline
// (a prompt waiting for an answer) is matched as it stands, and again once
// it grows, since the offset to resume at stays at its start.
func (c *Client) scanUntil(ctx context.Context, j db.Job, from int64, re *regexp.Regexp, clean bool) (string, int64, error) {
	for from < j.OutputBytes {
		p, err := logs.ReadRange(ctx, c.db, j.ID, from, 1<<20, logs.Filter{})
		if err != nil {
			return "", from, err
		}
		data := p.Data
		if len(data) == 0 {
			return "", max(from, p.NextOffset), nil
		}
		atEnd := p.End >= j.OutputBytes
		last := bytes.LastIndexByte(data, '\n')
		for rest := data; len(rest) > 0; {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else if atEnd {
				rest = nil // the pending partial line
			} else {
				break // cut by the page: read it whole next time
			}
			line = bytes.TrimRight(line, "\r")
			if clean {
				line = textclean.CleanLine(line)
			}
			if re.Match(line) {
				return string(line), 0, nil
			}
		}
		next := p.Start + int64(last+1)
		if j.Status.Terminal() && atEnd {
			next = p.End
		}
		if next <= from {
			// One line longer than the page, or a partial line: look
			// again when more has arrived.
			return "", from, nil
		}
		from = next
	}
	return "", from, nil
}

// Follow writes the job's output to w as it is produced, like tail -f,
// starting with the part r selects (by default the last DefaultTailChars
// characters). It returns when the job has finished and all its output is
// written, or when ctx ends.
func (c *Client) Follow(ctx context.Context, ref string, r Range, w io.Writer) error {
	if r.Clean {
		// The pages arrive cut anywhere, an escape sequence or a redrawn
		// line across two of them: one cleaner sees all the bytes in
		// order, and only finished lines are passed on until the end.
		// Grep still matches the cleaned text of each line.
		cw := &cleanWriter{w: w}
		r.Clean = false
		if err := c.follow(ctx, ref, r, cw, true); err != nil {
			return err
		}
		return cw.Close()
	}
	return c.follow(ctx, ref, r, w, false)
}

func (c *Client) follow(ctx context.Context, ref string, r Range, w io.Writer, cleanMatch bool) error {
	// Made before the first read, so that a write after it wakes the
	// first wait.
	wt := newWatcher(c.path)
	defer wt.Close()
	first, err := c.log(ctx, ref, r, cleanMatch)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, first.Text); err != nil {
		return err
	}
	f, err := filter(r.Stream, r.Grep, cleanMatch)
	if err != nil {
		return err
	}
	off := first.End
	lastSweep := time.Now()
	var last db.Job
	for {
		c.looks.Add(1)
		j, err := c.db.FindJobByID(ctx, first.JobID)
		if err != nil {
			return publicErr(ref, err)
		}
		wt.Looked(j.Status != last.Status || j.OutputBytes != last.OutputBytes)
		last = j
		for off < j.OutputBytes {
			p, err := logs.ReadRange(ctx, c.db, j.ID, off, 1<<20, f)
			if err != nil {
				return err
			}
			if _, err := w.Write(p.Data); err != nil {
				return err
			}
			if p.NextOffset <= off {
				break
			}
			off = p.NextOffset
		}
		if j.Status.Terminal() && off >= j.OutputBytes {
			return nil
		}
		if time.Since(lastSweep) >= 2*time.Second {
			_, _ = c.noticeLost(ctx)
			lastSweep = time.Now()
		}
		// Output and the job's end wake the wait; the bound is for a
		// supervisor that died without recording the end (noticeLost).
		if err := wt.Wait(ctx, statusLook); err != nil {
			return err
		}
	}
}

// EventCursor returns a cursor for Events (EventOptions.Since) after which
// every event recorded at or after t follows; some recorded a little
// earlier may follow too. Its cost is that of the events since t, not of
// the history before them: following from now on starts here, not at 0.
func (c *Client) EventCursor(ctx context.Context, t time.Time) (int64, error) {
	if err := c.check(ctx); err != nil {
		return 0, err
	}
	return c.db.EventCursorAt(ctx, t)
}

// EventOptions shapes Events.
type EventOptions struct {
	// Since returns events after this cursor (an Event.ID).
	Since int64
	// Follow keeps the sequence open, yielding new events as they
	// happen, until ctx ends.
	Follow bool
	// AllScopes includes every scope's events.
	AllScopes bool
	// JobID keeps one job's events (the exact id).
	JobID string
}

// Events yields the audit trail in order: every event once, none skipped,
// across supervisor restarts. Event IDs are the cursor: pass the last one
// seen as Since to resume.
func (c *Client) Events(ctx context.Context, o EventOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if err := c.check(ctx); err != nil {
			yield(Event{}, err)
			return
		}
		if o.Since < 0 {
			yield(Event{}, fmt.Errorf("%w: negative event cursor", ErrInvalid))
			return
		}
		w := newWatcher(c.db.Path)
		defer w.Close()
		since := o.Since
		const batch = 500
		lastSweep := time.Time{}
		for {
			if o.Follow && time.Since(lastSweep) >= 2*time.Second {
				_, _ = c.noticeLost(ctx)
				lastSweep = time.Now()
			}
			c.looks.Add(1)
			evs, err := c.db.Events(ctx, db.EventFilter{Scope: c.opts.Scope, AllScopes: o.AllScopes, JobID: o.JobID, SinceID: since, Limit: batch})
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			for _, e := range evs {
				if !yield(eventFromDB(e), nil) {
					return
				}
				since = e.ID
			}
			if len(evs) == batch {
				continue
			}
			if !o.Follow {
				return
			}
			w.Looked(len(evs) > 0)
			// Every event is a write that wakes the wait; the bound is
			// for a supervisor that died without recording its jobs'
			// end (noticeLost).
			if err := w.Wait(ctx, statusLook); err != nil {
				return
			}
		}
	}
}

// cleanWriter cleans the bytes written to it and writes the finished lines
// to w; Close writes the line still being written.
type cleanWriter struct {
	w io.Writer
	c textclean.Cleaner
}

func (cw *cleanWriter) Write(p []byte) (int, error) {
	cw.c.Write(p)
	if _, err := io.WriteString(cw.w, cw.c.TakeLines()); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (cw *cleanWriter) Close() error {
	_, err := io.WriteString(cw.w, cw.c.String())
	return err
}
