package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxHistory bounds the transitions status shows.
const maxHistory = 50

func (s *server) process(ctx context.Context, req *sdk.CallToolRequest, in processInput) (*sdk.CallToolResult, any, error) {
	if in.Action == "list" {
		return s.list(ctx, in)
	}
	known := false
	for _, a := range actions {
		known = known || a == in.Action
	}
	if !known {
		return nil, nil, argError("unknown action %q: use one of %s", in.Action, strings.Join(actions, ", "))
	}
	ref := strings.TrimSpace(in.SessionID)
	if ref == "" {
		return nil, nil, argError("sessionId is required for action=%s (process action=list shows the sessions)", in.Action)
	}
	switch in.Action {
	case "poll":
		return s.poll(ctx, ref)
	case "log":
		return s.log(ctx, ref, in)
	case "status":
		return s.status(ctx, ref)
	case "write":
		return s.write(ctx, ref, in)
	case "send_keys":
		return s.sendKeys(ctx, ref, in)
	case "capture":
		return s.capture(ctx, ref, in)
	case "kill":
		return s.kill(ctx, ref, in)
	case "pause":
		return s.signal(ctx, ref, "STOP")
	case "resume":
		return s.signal(ctx, ref, "CONT")
	case "clear":
		return s.clear(ctx, ref)
	case "remove":
		return s.remove(ctx, ref)
	default: // "wait"
		return s.wait(ctx, req, ref, in)
	}
}

type listResult struct {
	Scope    string    `json:"scope"`
	Sessions []jobView `json:"sessions"`
	// More counts the sessions after this page (at least that many with
	// MoreAtLeast); NextCursor continues the listing.
	More        int    `json:"more,omitempty"`
	MoreAtLeast bool   `json:"more_at_least,omitempty"`
	NextCursor  string `json:"next_cursor,omitempty"`
	Note        string `json:"note,omitempty"`
}

// listFilter reads list's arguments.
func listFilter(in processInput) (jobs.Filter, error) {
	f := jobs.Filter{Limit: defaultListJobs, Name: in.Name, Label: in.Label, Command: in.Command, Cursor: in.Cursor}
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > maxListJobs {
			return f, argError("limit must be 1 to %d for action=list, got %d", maxListJobs, *in.Limit)
		}
		f.Limit = int(*in.Limit)
	}
	if in.Since != nil {
		if *in.Since <= 0 || math.IsNaN(*in.Since) || math.IsInf(*in.Since, 0) {
			return f, argError("since must be a positive number of seconds, got %v", *in.Since)
		}
		f.Since = time.Now().Add(-time.Duration(*in.Since * float64(time.Second)))
	}
	for _, st := range in.Status {
		switch st = strings.ToLower(strings.TrimSpace(st)); st {
		case "active":
			f.Statuses = append(f.Statuses, jobs.StatusStarting, jobs.StatusRunning)
		case "finished":
			f.Statuses = append(f.Statuses, jobs.StatusDone, jobs.StatusFailed, jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost)
		case "starting", "running", "done", "failed", "killed", "timed_out", "lost":
			f.Statuses = append(f.Statuses, jobs.Status(st))
		default:
			return f, argError("unknown status %q: use running, done, failed, killed, timed_out, lost, starting, active or finished", st)
		}
	}
	return f, nil
}

func (s *server) list(ctx context.Context, in processInput) (*sdk.CallToolResult, any, error) {
	f, err := listFilter(in)
	if err != nil {
		return nil, nil, err
	}
	page, err := s.c.ListPage(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	js := page.Jobs
	r := listResult{Scope: s.c.Scope(), Sessions: []jobView{}, More: page.More, MoreAtLeast: page.MoreAtLeast, NextCursor: page.Next}
	if page.More > 0 {
		more := fmt.Sprint(page.More)
		if page.MoreAtLeast {
			more = "over " + more
		}
		r.Note = fmt.Sprintf("%s more sessions; pass cursor=next_cursor for the next page, or filter by status, name, label, command or since", more)
	}
	counts := map[jobs.Status]int{}
	var order []jobs.Status
	for _, j := range js {
		r.Sessions = append(r.Sessions, viewJob(j, false))
		if counts[j.Status] == 0 {
			order = append(order, j.Status)
		}
		counts[j.Status]++
	}
	line := fmt.Sprintf("no sessions in scope %q", r.Scope)
	if len(js) > 0 {
		var parts []string
		for _, st := range order {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
		line = fmt.Sprintf("%d session(s) in scope %q: %s", len(js), r.Scope, strings.Join(parts, ", "))
	}
	if r.Note != "" {
		line += "; " + r.Note
	}
	return result(line, r)
}

// pollResult is poll's and wait's structured result.
type pollResult struct {
	SessionID       string     `json:"sessionId"`
	Status          string     `json:"status"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	Signal          string     `json:"signal,omitempty"`
	Reason          string     `json:"reason,omitempty"`
	RuntimeMs       int64      `json:"runtime_ms"`
	WaitingForInput bool       `json:"waiting_for_input"`
	Stopped         bool       `json:"stopped,omitempty"`
	Descendants     int        `json:"descendants,omitempty"`
	Output          outputView `json:"output"`
	RetryInMs       int64      `json:"retry_in_ms,omitempty"`
	// WaitReason and Match are wait's: why it returned, and the matching
	// line.
	WaitReason string `json:"wait_reason,omitempty"`
	Match      string `json:"match,omitempty"`
	Note       string `json:"note,omitempty"`
}

func newPollResult(j jobs.Job, out outputView) pollResult {
	return pollResult{
		SessionID:       j.ID,
		Status:          string(j.Status),
		ExitCode:        j.ExitCode,
		Signal:          j.Signal,
		Reason:          j.Reason,
		RuntimeMs:       j.Runtime.Milliseconds(),
		WaitingForInput: j.WaitingForInput,
		Stopped:         j.Stopped,
		Descendants:     j.Descendants,
		Output:          out,
	}
}

func (s *server) poll(ctx context.Context, ref string) (*sdk.CallToolResult, any, error) {
	pr, err := s.readNew(ctx, ref, s.pollChars)
	if err != nil {
		return nil, nil, err
	}
	j, out := pr.job, pr.out
	r := newPollResult(j, out)
	// Output still pending counts as a change: come back soon.
	state := fmt.Sprintf("%s/%t/%t/%d/%d", j.Status, j.WaitingForInput, j.Stopped, j.Descendants, out.OmittedAfter)
	retry := s.backoff.observe(j.ID, out.End, state, j.Status.Terminal())
	r.RetryInMs = retry.Milliseconds()
	var notes []string
	if out.Note != "" {
		notes = append(notes, out.Note)
	}
	switch {
	case j.Status.Terminal() && out.OmittedAfter == 0:
		notes = append(notes, "finished and all output read: no need to poll again (action=log pages through it all)")
	case j.Status.Terminal():
	case out.Text == "":
		notes = append(notes, fmt.Sprintf("no new output; poll again in %s, or block with action=wait (until=REGEX, idle=SECONDS)", round(retry)))
	default:
		notes = append(notes, fmt.Sprintf("poll again in %s, or block with action=wait", round(retry)))
	}
	r.Note = strings.Join(notes, "; ")
	line := summary(j)
	if out.Text != "" {
		line += fmt.Sprintf("; %s of new output", size(int64(len(out.Text))))
	}
	return result(line+". "+r.Note, r)
}

type logResult struct {
	SessionID string     `json:"sessionId"`
	Status    string     `json:"status"`
	Unit      string     `json:"unit"`
	Output    outputView `json:"output"`
}

func (s *server) log(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	if in.Offset != nil && *in.Offset < 0 {
		return nil, nil, argError("offset must not be negative, got %d", *in.Offset)
	}
	if in.Limit != nil && *in.Limit < 0 {
		return nil, nil, argError("limit must not be negative, got %d", *in.Limit)
	}
	unit := in.Unit
	if unit == "" {
		unit = "lines"
	}
	r := jobs.Range{Stream: jobs.Stream(in.Stream), Grep: in.Grep, Clean: true}
	var notes []string
	limit := int64(0)
	if in.Limit != nil {
		limit = *in.Limit
	}
	switch unit {
	case "lines":
		if limit == 0 {
			limit = defaultLogLines
		}
		if limit > maxLogLines {
			notes = append(notes, fmt.Sprintf("limit capped at %d lines (asked %d); page on with offset", maxLogLines, limit))
			limit = maxLogLines
		}
		if in.Offset == nil {
			r.TailLines = limit
		} else {
			r.FromLine, r.Lines = *in.Offset+1, limit
		}
	case "bytes":
		if limit == 0 {
			limit = maxPageChars
		}
		if limit > maxPageChars {
			notes = append(notes, fmt.Sprintf("limit capped at %d bytes (asked %d); page on with offset=next_offset", maxPageChars, limit))
			limit = maxPageChars
		}
		r.ByteRange = true
		if in.Offset != nil {
			r.Offset = *in.Offset
		}
		r.Limit = limit
	default:
		return nil, nil, argError("unit must be lines or bytes, got %q", unit)
	}
	switch in.Stream {
	case "", "stdout", "stderr", "pty":
	default:
		return nil, nil, argError("stream must be stdout, stderr or pty, got %q", in.Stream)
	}

	o, err := s.c.Log(ctx, ref, r)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	out := viewOutput(o)
	if len(out.Text) > maxPageChars {
		// The page is longer than a result should be: keep its first
		// lines (a byte page is capped by the backend already, so only
		// lines get here, or text that cleaning made longer).
		text := cutEnd(out.Text, maxPageChars)
		text = strings.TrimSuffix(text, "…")
		if i := strings.LastIndexByte(text, '\n'); i > 0 && unit == "lines" {
			text = text[:i+1]
		}
		kept := int64(strings.Count(text, "\n"))
		notes = append(notes, fmt.Sprintf("page cut to %d KiB (%d of %d lines)", maxPageChars>>10, kept, out.Lines))
		out.Text, out.Lines, out.Truncated = text, kept, true
		if kept == 0 {
			notes = append(notes, fmt.Sprintf("line %d alone is longer than a page: read it with unit=bytes offset=%d", out.FirstLine, out.Start))
		}
	}
	var next int64
	if unit == "lines" {
		next = out.FirstLine + out.Lines
		if next < out.TotalLines || out.OmittedAfter > 0 {
			out.NextOffset = &next
			notes = append(notes, fmt.Sprintf("more after: continue with offset=%d", next))
		}
		if out.Lines > 0 {
			notes = append(notes, fmt.Sprintf("lines %d-%d of %d shown (offset %d)", out.FirstLine+1, out.FirstLine+out.Lines, out.TotalLines, out.FirstLine))
		} else {
			notes = append(notes, fmt.Sprintf("no lines here; the output has %d", out.TotalLines))
		}
	} else {
		next = o.NextOffset
		if next < out.TotalBytes {
			out.NextOffset = &next
			notes = append(notes, fmt.Sprintf("more after: continue with unit=bytes offset=%d", next))
		}
		notes = append(notes, fmt.Sprintf("bytes %d-%d of %d shown", out.Start, out.End, out.TotalBytes))
	}
	if out.OmittedBefore > 0 {
		notes = append(notes, fmt.Sprintf("%s before this page (offset=0 reads from the start)", size(out.OmittedBefore)))
	}
	if out.Evicted > 0 {
		notes = append(notes, fmt.Sprintf("%s inside this range was dropped by the output cap or a clear", size(out.Evicted)))
	}
	out.Note = strings.Join(notes, "; ")
	line := fmt.Sprintf("log of session %s: %s", ref, out.Note)
	return result(line, logResult{SessionID: o.JobID, Unit: unit, Output: out, Status: s.statusOf(ctx, ref)})
}

// statusOf returns the job's status for a result that is mainly about
// something else; an error leaves it empty.
func (s *server) statusOf(ctx context.Context, ref string) string {
	j, err := s.c.Get(ctx, ref)
	if err != nil {
		return ""
	}
	return string(j.Status)
}

type eventView struct {
	At     string          `json:"at"`
	Kind   string          `json:"kind"`
	From   string          `json:"from,omitempty"`
	To     string          `json:"to,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

type statusResult struct {
	Session jobView     `json:"session"`
	History []eventView `json:"history"`
	Note    string      `json:"note,omitempty"`
}

func (s *server) status(ctx context.Context, ref string) (*sdk.CallToolResult, any, error) {
	j, err := s.c.Get(ctx, ref)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	evs, err := s.c.History(ctx, j.ID)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	r := statusResult{Session: viewJob(j, true), History: []eventView{}}
	if len(evs) > maxHistory {
		r.Note = fmt.Sprintf("%d earlier events not shown", len(evs)-maxHistory)
		evs = evs[len(evs)-maxHistory:]
	}
	for _, e := range evs {
		r.History = append(r.History, eventView{At: stamp(&e.At), Kind: e.Kind, From: string(e.From), To: string(e.To), Detail: e.Detail})
	}
	return result(summary(j), r)
}

type writeResult struct {
	SessionID   string `json:"sessionId"`
	Written     int    `json:"bytes_written"`
	StdinClosed bool   `json:"stdin_closed"`
}

func (s *server) write(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	if in.Data == nil && !in.EOF {
		return nil, nil, argError("write needs data (or eof=true to close stdin)")
	}
	var data []byte
	if in.Data != nil {
		data = []byte(*in.Data)
	}
	if len(data) > maxWriteBytes {
		return nil, nil, argError("data is %s; one write takes at most %s: split it into several writes", size(int64(len(data))), size(maxWriteBytes))
	}
	r := writeResult{SessionID: ref}
	if len(data) > 0 {
		if err := s.c.Write(ctx, ref, data); err != nil {
			return nil, nil, describe(ref, err)
		}
		r.Written = len(data)
	}
	if in.EOF {
		if err := s.c.CloseStdin(ctx, ref); err != nil {
			return nil, nil, describe(ref, err)
		}
		r.StdinClosed = true
	}
	line := fmt.Sprintf("wrote %s to the stdin of session %s", size(int64(r.Written)), ref)
	if r.StdinClosed {
		line += " and closed it"
	}
	return result(line+"; read the reply with action=poll or action=wait", r)
}

type keysResult struct {
	SessionID string `json:"sessionId"`
	Keys      int    `json:"keys_sent"`
}

func (s *server) sendKeys(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	if len(in.Keys) == 0 {
		return nil, nil, argError("send_keys needs keys, e.g. [\"y\", \"Enter\"] or, with literal=true, the text to type")
	}
	if err := s.c.SendKeys(ctx, ref, in.Keys, in.Literal); err != nil {
		return nil, nil, describe(ref, err)
	}
	return result(fmt.Sprintf("sent %d key(s) to session %s; see the screen with action=capture", len(in.Keys), ref),
		keysResult{SessionID: ref, Keys: len(in.Keys)})
}

type captureResult struct {
	SessionID string `json:"sessionId"`
	Screen    string `json:"screen"`
	Note      string `json:"note,omitempty"`
}

func (s *server) capture(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	scrollback := int64(0)
	var notes []string
	if in.Scrollback != nil {
		scrollback = *in.Scrollback
	}
	if scrollback < 0 {
		return nil, nil, argError("scrollback must not be negative, got %d", scrollback)
	}
	if scrollback > maxCaptureLines {
		notes = append(notes, fmt.Sprintf("scrollback capped at %d lines", maxCaptureLines))
		scrollback = maxCaptureLines
	}
	text, err := s.c.Capture(ctx, ref, int(scrollback))
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	text, cut := cutStart(text, maxPageChars)
	if cut > 0 {
		notes = append(notes, fmt.Sprintf("%s at the top not shown; use less scrollback or action=log", size(int64(cut))))
	}
	r := captureResult{SessionID: ref, Screen: text, Note: strings.Join(notes, "; ")}
	line := fmt.Sprintf("screen of session %s", ref)
	if r.Note != "" {
		line += "; " + r.Note
	}
	return result(line, r)
}

type killResult struct {
	SessionID   string `json:"sessionId"`
	Status      string `json:"status,omitempty"`
	Signal      string `json:"signal,omitempty"`
	Signalled   []int  `json:"signalled"`
	Survivors   []int  `json:"survivors,omitempty"`
	Escalated   bool   `json:"escalated,omitempty"`
	AlreadyDone bool   `json:"already_done,omitempty"`
	Removed     bool   `json:"removed,omitempty"`
}

func viewKill(k jobs.KillResult) killResult {
	r := killResult{
		SessionID:   k.JobID,
		Status:      string(k.Status),
		Signalled:   k.Signalled,
		Survivors:   k.Survivors,
		Escalated:   k.Escalated,
		AlreadyDone: k.AlreadyDone,
	}
	if r.Signalled == nil {
		r.Signalled = []int{}
	}
	return r
}

func killLine(verb string, k killResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s %s", k.SessionID, verb)
	switch {
	case k.AlreadyDone:
		fmt.Fprintf(&b, "; it had already finished (%s), nothing to kill", k.Status)
	case len(k.Signalled) > 0:
		fmt.Fprintf(&b, "; signalled %d process(es) %v", len(k.Signalled), k.Signalled)
		if k.Escalated {
			b.WriteString(", SIGKILL was needed after the grace period")
		}
	}
	if len(k.Survivors) > 0 {
		fmt.Fprintf(&b, "; WARNING: %d process(es) survived SIGKILL: %v", len(k.Survivors), k.Survivors)
	}
	return b.String()
}

// signal sends one signal to the session's processes (kill with signal,
// pause, resume).
func (s *server) signal(ctx context.Context, ref, sig string) (*sdk.CallToolResult, any, error) {
	pids, err := s.c.Signal(ctx, ref, sig)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	r := killResult{SessionID: ref, Signal: strings.ToUpper(sig), Signalled: pids}
	if r.Signalled == nil {
		r.Signalled = []int{}
	}
	return result(fmt.Sprintf("sent %s to %d process(es) of session %s %v; check with action=poll", r.Signal, len(pids), ref, pids), r)
}

func (s *server) kill(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	if sig := strings.TrimSpace(in.Signal); sig != "" {
		return s.signal(ctx, ref, sig)
	}
	k, err := s.c.Kill(ctx, ref, 0)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	r := viewKill(k)
	if r.SessionID == "" {
		r.SessionID = ref
	}
	return result(killLine("killed", r), r)
}

type clearResult struct {
	SessionID string `json:"sessionId"`
	Cleared   bool   `json:"cleared"`
}

func (s *server) clear(ctx context.Context, ref string) (*sdk.CallToolResult, any, error) {
	if err := s.c.Clear(ctx, ref); err != nil {
		return nil, nil, describe(ref, err)
	}
	return result(fmt.Sprintf("cleared the stored output of session %s (new output is still recorded; offsets stay absolute)", ref),
		clearResult{SessionID: ref, Cleared: true})
}

func (s *server) remove(ctx context.Context, ref string) (*sdk.CallToolResult, any, error) {
	k, err := s.c.Remove(ctx, ref)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	r := viewKill(k)
	if r.SessionID == "" {
		r.SessionID = ref
	}
	r.Removed = true
	s.backoff.reset(r.SessionID)
	verb := "removed"
	if len(r.Signalled) > 0 {
		verb = "killed and removed"
	}
	r.AlreadyDone = false
	return result(killLine(verb, r), r)
}

func (s *server) wait(ctx context.Context, req *sdk.CallToolRequest, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	var notes []string
	timeout := defaultWait
	if in.Timeout != nil {
		d, err := seconds("timeout", *in.Timeout)
		if err != nil {
			return nil, nil, err
		}
		timeout = d
	}
	if timeout <= 0 || timeout > maxWait {
		notes = append(notes, fmt.Sprintf("timeout capped at %s so the call returns before the client gives up; call wait again to keep waiting", maxWait))
		timeout = maxWait
	}
	o := jobs.WaitOptions{Timeout: timeout, Until: in.Until, Progress: s.progress(ctx, req, timeout)}
	if in.Idle != nil {
		d, err := seconds("idle", *in.Idle)
		if err != nil {
			return nil, nil, err
		}
		o.Idle = d
	}
	start := time.Now()
	wr, err := s.c.Wait(ctx, []string{ref}, o)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	if len(wr.Jobs) == 0 {
		return nil, nil, &sessionError{ref, "not found", jobs.ErrNotFound}
	}
	j := wr.Jobs[0]
	s.backoff.reset(j.ID)
	chars := int64(waitChars)
	if j.Status.Terminal() {
		chars = resultChars
	}
	pr, err := s.tail(ctx, j.ID, chars)
	if err != nil {
		return nil, nil, err
	}
	out := pr.out
	r := newPollResult(j, out)
	r.WaitReason, r.Match = string(wr.Reason), cutEnd(wr.Match, 1000)
	if out.Note != "" {
		notes = append(notes, out.Note)
	}
	waited := round(time.Since(start))
	var why string
	switch wr.Reason {
	case jobs.WaitExited:
		why = "finished"
	case jobs.WaitMatched:
		why = fmt.Sprintf("output matched %q after %s: %s", in.Until, waited, r.Match)
	case jobs.WaitIdle:
		why = fmt.Sprintf("output silent for %s", round(o.Idle))
	default:
		why = fmt.Sprintf("still running after waiting %s; call wait again to keep waiting", waited)
	}
	r.Note = strings.Join(notes, "; ")
	line := summary(j) + ". wait: " + why
	if r.Note != "" {
		line += "; " + r.Note
	}
	return result(line, r)
}
