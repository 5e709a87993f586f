package mcp

// Lines as the claude-code document's buffers hold them. The document
// splits each chunk of a stream on "\n", keeps the pieces that are not
// blank, and bash_output returns the pieces added since the last read,
// stdout and stderr apart. Here the output is in the database, read
// through the job's one read cursor, and a line is a line of its own
// stream: the bytes up to a "\n" of that stream, however the writes were
// cut and whatever the other stream wrote in between. A line is returned
// once, whole, by the read whose range holds its "\n"; its start may lie
// before the cursor (an earlier read ended inside it), so that read looks
// back for it. The last line of a stream that never got its "\n" is
// returned when the job has ended, by exactly one read (a note on the
// job's audit trail marks it done). The document returns the unterminated
// piece of a running process at once and the rest of the line later as
// another line; returning it once, whole, is the correct reading of its
// "buffers of lines".

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

const (
	// claudeBufferLines is the document's MAX_BUFFER_LINES: a buffer
	// holds at most this many lines of a stream, and list_shells and the
	// initial output count at most this many.
	claudeBufferLines = 10000
	// claudeMaxProcesses is the document's MAX_PROCESSES: list_shells
	// shows the running processes and the newest ended ones, this many in
	// all (more only when more are running).
	claudeMaxProcesses = 20
	// claudeReadBytes is how much new output one bash_output read takes,
	// the bound of every result of the server (the document returns all;
	// here the rest comes with the next read, and pending says how much
	// is left).
	claudeReadBytes = resultChars
	// claudeBackBytes is how far before its window a read looks for the
	// start of a line an earlier read ended inside; a line that began
	// further back is looked for with more reads.
	claudeBackBytes = 4 << 10
	// claudeMaxLine is the longest line returned whole: of a longer line,
	// its last claudeMaxLine bytes.
	claudeMaxLine = 1 << 20
	// claudeCountBytes bounds what a line count reads of one stream.
	claudeCountBytes = 8 << 20
	// claudeLastLinesNote marks on a job's audit trail that bash_output
	// returned the lines of its end (unterminated last lines, the timeout
	// line): they are returned once.
	claudeLastLinesNote = "claude-code: bash_output returned the last lines"
)

// claudeNew is what one bash_output read found: the new non-blank lines of
// each stream, cleaned, and the job as it was.
type claudeNew struct {
	job            jobs.Job
	stdout, stderr []string
	pending        int64 // new bytes left for the next read
}

// claudeOut is the stream the document calls stdout: a tmux or pty job
// (started under another profile) has one terminal stream.
func claudeOut(j jobs.Job) jobs.Stream {
	if j.Mode == jobs.ModeTmux || j.Mode == jobs.ModePTY {
		return jobs.PTY
	}
	return jobs.Stdout
}

// claudeReadNew reads the lines that are new since the last read of job id
// and moves the read cursor past them. A window that ends no line (a long
// line being passed, only blank lines) is followed by the next one within
// the call, up to claudeMaxLine bytes: a read that returns nothing has
// nothing more to return.
func (s *server) claudeReadNew(ctx context.Context, id string) (claudeNew, error) {
	var r claudeNew
	for passed := int64(0); ; {
		step, moved, err := s.claudeReadStep(ctx, id)
		if err != nil {
			return claudeNew{}, err
		}
		r.job, r.pending = step.job, step.pending
		r.stdout = append(r.stdout, step.stdout...)
		r.stderr = append(r.stderr, step.stderr...)
		passed += moved
		if len(r.stdout)+len(r.stderr) > 0 || step.pending == 0 || moved == 0 || passed >= claudeMaxLine {
			return r, nil
		}
	}
}

// claudeReadStep is one window of claudeReadNew; it also returns how far
// it moved the read cursor.
func (s *server) claudeReadStep(ctx context.Context, id string) (claudeNew, int64, error) {
	for attempt := 0; ; attempt++ {
		j, err := s.c.Get(ctx, id)
		if err != nil {
			return claudeNew{}, 0, err
		}
		from := j.ReadCursor
		// One read takes the window and the bytes just before it, where a
		// line an earlier read ended inside begins (most lines are short).
		back := min(from, claudeBackBytes)
		segs, o, err := s.c.Segments(ctx, j.ID, from-back, back+claudeReadBytes)
		if err != nil {
			return claudeNew{}, 0, err
		}
		window := claudeFrom(segs, from)
		final := j.Status.Terminal() && o.End >= o.TotalBytes
		cut := o.End
		if !final {
			cut = claudeCut(window, from, o.End, o.TotalBytes)
		}
		streams := []jobs.Stream{claudeOut(j), jobs.Stderr}
		var complete, partial [2][]byte
		for i, st := range streams {
			text := claudeBytes(window, st, cut)
			nl := bytes.LastIndexByte(text, '\n')
			if from > 0 && (nl >= 0 || final) {
				before := claudeBytes(segs, st, from)
				head := before
				if k := bytes.LastIndexByte(before, '\n'); k >= 0 {
					head = before[k+1:]
				} else if back < from {
					// The line began further back.
					if head, err = s.claudeLineHead(ctx, j.ID, st, from); err != nil {
						return claudeNew{}, 0, err
					}
				}
				text = append(head, text...)
				nl = bytes.LastIndexByte(text, '\n')
			}
			complete[i], partial[i] = text[:nl+1], text[nl+1:]
		}
		if cut > from {
			ok, err := s.c.MarkRead(ctx, j.ID, from, cut)
			if err != nil {
				return claudeNew{}, 0, err
			}
			if !ok {
				if attempt < 10 {
					continue // another reader moved the cursor: read again from there
				}
				return claudeNew{}, 0, fmt.Errorf("read new output of process %s: other readers keep moving its read cursor", j.ID)
			}
		}
		r := claudeNew{job: j, pending: o.TotalBytes - cut}
		r.stdout = nonEmptyLines(textclean.Clean(complete[0]))
		r.stderr = nonEmptyLines(textclean.Clean(complete[1]))
		if final {
			out := nonEmptyLines(textclean.Clean(partial[0]))
			errs := append(nonEmptyLines(textclean.Clean(partial[1])), claudeNotes(j)...)
			if len(out)+len(errs) > 0 {
				first, err := s.c.NoteOnce(ctx, j.ID, claudeLastLinesNote)
				if err != nil && !errors.Is(err, jobs.ErrNotFound) {
					return claudeNew{}, 0, err
				}
				if first {
					r.stdout = append(r.stdout, out...)
					r.stderr = append(r.stderr, errs...)
				}
			}
		}
		return r, cut - from, nil
	}
}

// claudeFrom is the part of segs at or after offset at.
func claudeFrom(segs []jobs.Segment, at int64) []jobs.Segment {
	var out []jobs.Segment
	for _, sg := range segs {
		if end := sg.Offset + int64(len(sg.Text)); end > at {
			if sg.Offset < at {
				sg.Text, sg.Offset = sg.Text[at-sg.Offset:], at
			}
			out = append(out, sg)
		}
	}
	return out
}

// claudeBytes is the bytes of stream st in segs before offset end.
func claudeBytes(segs []jobs.Segment, st jobs.Stream, end int64) []byte {
	var b []byte
	for _, sg := range segs {
		if sg.Stream == st && sg.Offset < end {
			b = append(b, sg.Text[:min(int64(len(sg.Text)), end-sg.Offset)]...)
		}
	}
	return b
}

// claudeCut is where a read of a running job (or of output beyond the
// window) ends: after the last newline of the window, so that lines end
// with it. With none, a window short of the output's end is passed whole
// (a line longer than the window: the next read looks back for its
// start), and one that reaches it is left for later (the line is still
// being written).
func claudeCut(segs []jobs.Segment, from, end, total int64) int64 {
	for i := len(segs) - 1; i >= 0; i-- {
		if k := strings.LastIndexByte(segs[i].Text, '\n'); k >= 0 {
			return segs[i].Offset + int64(k) + 1
		}
	}
	if end < total {
		return end
	}
	return from
}

// claudeLineHead returns the bytes of stream st before offset at that
// follow its last newline there: the start of a line an earlier read ended
// inside. It looks back in growing steps, at most claudeMaxLine bytes of
// the stream and jobs.MaxPageBytes of the output.
func (s *server) claudeLineHead(ctx context.Context, id string, st jobs.Stream, at int64) ([]byte, error) {
	for k := int64(4 * claudeBackBytes); ; k *= 4 {
		from := max(0, at-k)
		segs, _, err := s.c.Segments(ctx, id, from, at-from)
		if err != nil {
			return nil, err
		}
		b := claudeBytes(segs, st, at)
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return b[i+1:], nil
		}
		if from == 0 || len(b) >= claudeMaxLine || at-from >= jobs.MaxPageBytes {
			return b[max(0, len(b)-claudeMaxLine):], nil
		}
	}
}

// claudeLines counts the non-blank lines of stream st of job id as the
// document's buffer holds them (at most claudeBufferLines; the
// unterminated last piece counts, as the document pushes it) and returns
// the first keep of them, cleaned.
func (s *server) claudeLines(ctx context.Context, j jobs.Job, st jobs.Stream, keep int) (int, []string, error) {
	var (
		n       int
		first   []string
		scanned int64
	)
	for line := int64(jobs.FirstLine); n < claudeBufferLines; {
		p, err := s.c.Log(ctx, j.ID, jobs.Range{FromLine: line, Lines: claudeBufferLines, Stream: st})
		if err != nil {
			return 0, nil, err
		}
		text := p.Text
		atEnd := !p.Truncated && p.Lines < claudeBufferLines
		if !atEnd {
			// A page cut inside a line: the line is counted with the next.
			if i := strings.LastIndexByte(text, '\n'); i >= 0 {
				text = text[:i+1]
			}
		}
		for _, l := range nonEmptyLines(textclean.Clean([]byte(text))) {
			if n < keep {
				first = append(first, l)
			}
			n++
		}
		scanned += int64(len(p.Text))
		if atEnd || p.Lines == 0 || scanned >= claudeCountBytes {
			if !atEnd && p.Lines > 0 {
				// Past the budget: the stream's line count stands in.
				n = max(n, int(min(p.TotalLines, claudeBufferLines)))
			}
			break
		}
		line += p.Lines
	}
	return min(n, claudeBufferLines), first, nil
}

// claudeNotes are the lines the document adds to a process's error buffer
// itself: the timeout's, and the spawn error's ("Process error: …", here a
// job that could not start or whose supervisor died).
func claudeNotes(j jobs.Job) []string {
	switch {
	case j.Status == jobs.StatusTimedOut:
		return []string{fmt.Sprintf("Process killed after %dms timeout", j.Timeout.Milliseconds())}
	case (j.Status == jobs.StatusFailed || j.Status == jobs.StatusLost) && j.ExitCode == nil && j.Reason != "":
		return []string{"Process error: " + j.Reason}
	}
	return nil
}

// claudeErrors returns the count of job j's error lines as the document's
// errorBuffer holds them (stderr, then its own notes) and the first keep.
func (s *server) claudeErrors(ctx context.Context, j jobs.Job, keep int) (int, []string, error) {
	n, first, err := s.claudeLines(ctx, j, jobs.Stderr, keep)
	if err != nil {
		return 0, nil, err
	}
	notes := claudeNotes(j)
	first = append(first, notes[:min(len(notes), max(0, keep-len(first)))]...)
	return min(n+len(notes), claudeBufferLines), first, nil
}

// claudeRegistry is the document's process registry: every running job of
// the scope and the newest ended ones, claudeMaxProcesses in all (more
// only when more run), in the order they started.
func (s *server) claudeRegistry(ctx context.Context) ([]jobs.Job, error) {
	running, err := s.c.List(ctx, jobs.Filter{Statuses: []jobs.Status{jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning}})
	if err != nil {
		return nil, err
	}
	recent, err := s.c.List(ctx, jobs.Filter{Limit: claudeMaxProcesses})
	if err != nil {
		return nil, err
	}
	list := running
	seen := make(map[string]bool, len(running))
	for _, j := range running {
		seen[j.ID] = true
	}
	for _, j := range recent {
		if len(list) >= claudeMaxProcesses {
			break
		}
		if j.Status.Terminal() && !seen[j.ID] { // one that ended between the two reads is in both
			list = append(list, j)
		}
	}
	slices.SortStableFunc(list, func(a, b jobs.Job) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return list, nil
}
