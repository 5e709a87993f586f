package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxHistory bounds the transitions status shows.
const maxHistory = 50

func (s *server) process(ctx context.Context, req *sdk.CallToolRequest, in processInput) (*sdk.CallToolResult, any, error) {
	i := slices.IndexFunc(actions, func(a actionParams) bool { return a.name == in.Action })
	if i < 0 {
		names := make([]string, len(actions))
		for k, a := range actions {
			names[k] = a.name
		}
		return nil, nil, argError("unknown action \"%s\": use one of %s", textclean.Echo(in.Action), strings.Join(names, ", "))
	}
	if err := checkParams("process", actions[i], req); err != nil {
		return nil, nil, err
	}
	if in.Filter != "" {
		if in.Grep != "" && in.Grep != in.Filter {
			return nil, nil, argError("give grep or filter, not both")
		}
		in.Grep = in.Filter
	}
	if in.Action == "list" {
		return s.list(ctx, in)
	}
	if in.Action == "wait" {
		return s.wait(ctx, req, in)
	}
	ref := strings.TrimSpace(in.SessionID)
	if ref == "" {
		return nil, nil, argError("sessionId is required for action=%s (process action=list shows the sessions)", in.Action)
	}
	res, v, err := s.processSession(ctx, req, ref, in)
	if errors.Is(err, jobs.ErrNotFound) && s.off != nil {
		// The session is gone (its TTL expired): so is its offloaded
		// file, now rather than at the mirror's next look.
		s.off.gone(ref)
	}
	return res, v, err
}

// processSession runs an action on one session.
func (s *server) processSession(ctx context.Context, req *sdk.CallToolRequest, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	switch in.Action {
	case "poll":
		return s.poll(ctx, req, ref, in)
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
		return s.kill(ctx, ref, in.Signal)
	case "clear":
		return s.clear(ctx, ref)
	case "remove":
		return s.remove(ctx, ref)
	case "pause":
		return s.signal(ctx, ref, "STOP")
	case "restart":
		j, err := s.c.Restart(ctx, ref, nil)
		if err != nil {
			return nil, nil, describe(ref, err)
		}
		return s.status(ctx, j.ID)
	default: // "resume"
		return s.signal(ctx, ref, "CONT")
	}
}

// killTool is kill_process: the actions that end or delete.
func (s *server) killTool(ctx context.Context, req *sdk.CallToolRequest, in killInput) (*sdk.CallToolResult, any, error) {
	if in.Action == "" {
		in.Action = "kill"
	}
	i := slices.IndexFunc(killActions, func(a actionParams) bool { return a.name == in.Action })
	if i < 0 {
		return nil, nil, argError("unknown action \"%s\": use kill, clear or remove", textclean.Echo(in.Action))
	}
	if err := checkParams("kill_process", killActions[i], req); err != nil {
		return nil, nil, err
	}
	ref := strings.TrimSpace(in.SessionID)
	if ref == "" {
		return nil, nil, argError("sessionId is required for action=%s (process action=list shows the sessions)", in.Action)
	}
	switch in.Action {
	case "clear":
		return s.clear(ctx, ref)
	case "remove":
		return s.remove(ctx, ref)
	}
	return s.kill(ctx, ref, in.Signal)
}

// checkParams refuses a parameter the action does not take, naming those it
// does: a silently ignored parameter (until on poll, say) leaves the model
// believing it did something. A parameter given as null, "", false or []
// asks for nothing and passes.
func checkParams(tool string, a actionParams, req *sdk.CallToolRequest) error {
	if req == nil || req.Params == nil || len(req.Params.Arguments) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(req.Params.Arguments, &args) != nil {
		return nil // the SDK decoded them; nothing to add
	}
	var extra []string
	for k, v := range args {
		if k == "action" || slices.Contains(a.params, k) {
			continue
		}
		switch strings.TrimSpace(string(v)) {
		case "null", `""`, "false", "[]":
			continue
		}
		extra = append(extra, k)
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return argError("%s action=%s does not take %s; it takes %s", tool, a.name, strings.Join(extra, ", "), strings.Join(a.params, ", "))
}

// listLine is one session in list's text: at most about 120 characters.
const listCommandChars = 60

type listResult struct {
	Scope    string     `json:"scope"`
	Sessions []listView `json:"sessions"`
	// More counts the sessions after this page (at least that many with
	// MoreAtLeast); NextCursor continues the listing.
	More        int    `json:"more,omitempty"`
	MoreAtLeast bool   `json:"more_at_least,omitempty"`
	NextCursor  string `json:"next_cursor,omitempty"`
	Note        string `json:"note,omitempty"`
}

// listView is a session as list shows it: OpenClaw's SessionMeta, then
// what jobs adds. Times are milliseconds since the epoch. lastAccessedAt
// is the job's last read or change as jobs records it (its TTL counts
// from there, as the original's does); outputLength counts the bytes the job
// wrote. offloaded says the output passed 10 KB and is mirrored to
// outputFilePath (the database keeps all of it as well; log reads any
// part).
type listView struct {
	SessionID      string `json:"sessionId"`
	Command        string `json:"command"`
	Status         string `json:"status"`
	CreatedAt      int64  `json:"createdAt"`
	LastAccessedAt int64  `json:"lastAccessedAt"`
	PID            int    `json:"pid,omitempty"`
	ExitCode       *int   `json:"exitCode,omitempty"`
	OutputLength   int64  `json:"outputLength"`
	Offloaded      bool   `json:"offloaded"`
	OutputFilePath string `json:"outputFilePath,omitempty"`
	Name           string `json:"name,omitempty"`
	RuntimeMs      int64  `json:"runtime_ms"`
	Queue          string `json:"queue,omitempty"`
	QueuePosition  int    `json:"queue_position,omitempty"`
}

// listFilter reads list's arguments. status takes one word or several
// separated by commas.
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
	for _, st := range strings.Split(in.Status, ",") {
		switch st = strings.ToLower(strings.TrimSpace(st)); st {
		case "":
		case "active":
			f.Statuses = append(f.Statuses, jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning)
		case "finished":
			f.Statuses = append(f.Statuses, jobs.StatusDone, jobs.StatusFailed, jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost)
		case "error": // the original interfaces' words, as results use them
			f.Statuses = append(f.Statuses, jobs.StatusFailed, jobs.StatusLost)
		case "killed":
			f.Statuses = append(f.Statuses, jobs.StatusKilled, jobs.StatusTimedOut)
		case "running":
			f.Statuses = append(f.Statuses, jobs.StatusStarting, jobs.StatusRunning)
		default:
			if !slices.Contains(statuses, jobs.Status(st)) {
				return f, argError("unknown status \"%s\": use %s, error, active or finished", textclean.Echo(st), joinStatuses())
			}
			f.Statuses = append(f.Statuses, jobs.Status(st))
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
	r := listResult{Scope: s.c.Scope(), Sessions: []listView{}, More: page.More, MoreAtLeast: page.MoreAtLeast, NextCursor: page.Next}
	more := ""
	if page.More > 0 {
		more = fmt.Sprint(page.More)
		if page.MoreAtLeast {
			more = "over " + more
		}
		r.Note = fmt.Sprintf("%s more sessions; pass cursor=next_cursor for the next page, or filter by status, name, label, command or since", more)
	}
	var b strings.Builder
	for _, j := range js {
		v := listView{SessionID: j.ID, Name: j.Name, Status: openclawStatus(j.Status), ExitCode: j.ExitCode,
			CreatedAt: j.CreatedAt.UnixMilli(), LastAccessedAt: lastAccess(j).UnixMilli(), OutputLength: j.OutputBytes,
			RuntimeMs: j.Runtime.Milliseconds(), Command: cutEnd(textclean.Escape(commandLine(j)), listCommandChars),
			Queue: j.Queue, QueuePosition: j.QueuePosition}
		if !j.Status.Terminal() {
			v.PID = j.PID
		}
		if s.off != nil {
			st := s.off.view(ctx, j)
			v.Offloaded, v.OutputFilePath = st.Offloaded, st.Path
		}
		r.Sessions = append(r.Sessions, v)
		fmt.Fprintf(&b, "\n%s %s", j.ID, v.Status)
		if j.ExitCode != nil {
			fmt.Fprintf(&b, " %d", *j.ExitCode)
		}
		if j.WaitingForInput {
			b.WriteString(" (input)")
		}
		if j.Status == jobs.StatusQueued {
			fmt.Fprintf(&b, " (queued #%d%s)", j.QueuePosition, queueIn(j))
		}
		fmt.Fprintf(&b, " %s", round(j.Runtime))
		if j.Name != "" {
			fmt.Fprintf(&b, " [%s]", cutEnd(textclean.Escape(j.Name), 20))
		}
		fmt.Fprintf(&b, " %s", v.Command)
	}
	line := fmt.Sprintf("%d session(s) in scope \"%s\"", len(js), textclean.Echo(r.Scope))
	if more != "" {
		line += fmt.Sprintf("; %s more (cursor=%s continues; filters: status, name, label, command, since)", more, page.Next)
	}
	return result(line+b.String(), r)
}

// lastAccess is the latest of the job's recorded access, creation, last
// output and end: jobs records reads of a finished job only.
func lastAccess(j jobs.Job) time.Time {
	t := j.CreatedAt
	for _, u := range []*time.Time{&j.LastAccess, j.LastOutputAt, j.EndedAt} {
		if u != nil && u.After(t) {
			t = *u
		}
	}
	return t
}

// statuses are the words list's status filter takes (besides active).
var statuses = []jobs.Status{jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning, jobs.StatusDone, jobs.StatusFailed,
	jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost}

func joinStatuses() string {
	var names []string
	for _, st := range statuses {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}

// pollResult is poll's and wait's structured result: OpenClaw's status,
// output (a string), exitCode and offloaded, then what jobs adds.
type pollResult struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	// Output is poll's the documents' way: the last maxOutputChars (500)
	// characters of the output, on every poll. wait's is what the caller
	// has not read yet.
	Output   string `json:"output"`
	ExitCode *int   `json:"exitCode,omitempty"`
	// Offloaded says the output passed 10 KB and is mirrored to
	// OutputFilePath, a file the agent's file tools read.
	Offloaded       bool       `json:"offloaded"`
	OutputFilePath  string     `json:"outputFilePath,omitempty"`
	Signal          string     `json:"signal,omitempty"`
	Reason          string     `json:"reason,omitempty"`
	RuntimeMs       int64      `json:"runtime_ms"`
	WaitingForInput bool       `json:"waiting_for_input"`
	Stopped         bool       `json:"stopped,omitempty"`
	Descendants     int        `json:"descendants,omitempty"`
	OutputInfo      outputView `json:"output_info"`
	// NewOutput is poll's addition: the output since the previous poll
	// (the newest part when more is new than 500 characters, saying what
	// it skipped in NewOutputInfo), which moves the read cursor.
	NewOutput     *string     `json:"new_output,omitempty"`
	NewOutputInfo *outputView `json:"new_output_info,omitempty"`
	RetryInMs     int64       `json:"retry_in_ms,omitempty"`
	// WaitReason and Match are wait's: why it returned, and the matching
	// line.
	WaitReason string `json:"wait_reason,omitempty"`
	Match      string `json:"match,omitempty"`
	// Ended and Sessions are wait's for several sessions: which have
	// ended, and each one's state.
	Ended    []string       `json:"ended,omitempty"`
	Sessions []sessionState `json:"sessions,omitempty"`
	Note     string         `json:"note,omitempty"`
}

func newPollResult(j jobs.Job, out outputView) pollResult {
	return pollResult{
		SessionID:       j.ID,
		Status:          openclawStatus(j.Status),
		Output:          out.Text,
		ExitCode:        j.ExitCode,
		Signal:          j.Signal,
		Reason:          j.Reason,
		RuntimeMs:       j.Runtime.Milliseconds(),
		WaitingForInput: j.WaitingForInput,
		Stopped:         j.Stopped,
		Descendants:     j.Descendants,
		OutputInfo:      out,
	}
}

// offloaded brings the session's offloaded file up to date (OpenClaw's
// profile) and says whether there is one, and where; a file that cannot
// be written is a note, and the session reads as not offloaded (the
// documents: a file error gives an empty answer and a warning, not a
// failed call).
func (s *server) offloaded(ctx context.Context, j jobs.Job) (bool, string, string) {
	if s.off == nil {
		return false, "", ""
	}
	st, err := s.off.sync(ctx, j)
	if err != nil && !st.Offloaded {
		if errors.Is(err, jobs.ErrNotFound) {
			return false, "", ""
		}
		return false, "", "the output could not be offloaded to a file: " + err.Error()
	}
	return st.Offloaded, st.Path, ""
}

func (s *server) poll(ctx context.Context, req *sdk.CallToolRequest, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	var notes []string
	if in.Timeout != nil {
		// OpenClaw's poll blocks for new output: wait for it (or the end,
		// or a prompt), then read as usual.
		d, err := seconds("timeout", *in.Timeout)
		if err != nil {
			return nil, nil, err
		}
		if d > s.bound {
			notes = append(notes, fmt.Sprintf("timeout capped at %s (the call bound)", round(s.bound)))
			d = s.bound
		}
		if d > 0 {
			if _, err := s.c.Wait(ctx, []string{ref}, jobs.WaitOptions{Timeout: d, Input: true, NewOutput: true, Progress: s.progress(ctx, req, d)}); err != nil {
				return nil, nil, describe(ref, err)
			}
		}
	}
	// What is new since the last poll, the addition; it moves the cursor.
	o := jobs.PollOptions{Tail: s.pollChars, Newest: true, Grep: in.Grep}
	if in.Grep != "" {
		o.Newest = false // matching lines are read in order
	}
	pr, err := s.readNewWith(ctx, ref, o)
	if err != nil {
		return nil, nil, err
	}
	j, fresh := pr.job, pr.out
	// The documents' output: the last maxOutputChars characters, on every
	// poll.
	tr, err := s.lastChars(ctx, j.ID, s.pollChars, in.Grep)
	if err != nil {
		return nil, nil, err
	}
	if tr.job.ID != "" {
		j = tr.job
	}
	r := newPollResult(j, tr.out)
	r.NewOutput, r.NewOutputInfo = &fresh.Text, &fresh
	var offNote string
	r.Offloaded, r.OutputFilePath, offNote = s.offloaded(ctx, j)
	state := fmt.Sprintf("%s/%t/%t/%d", j.Status, j.WaitingForInput, j.Stopped, j.Descendants)
	quiet := j.Runtime
	if j.LastOutputAt != nil {
		quiet = time.Since(*j.LastOutputAt)
	}
	retry := s.backoff.observe(j.ID, state, j.OutputBytes, quiet, j.Status.Terminal())
	r.RetryInMs = retry.Milliseconds()
	switch n := utf8.RuneCountInString(fresh.Text); {
	case n > 0:
		notes = append(notes, fmt.Sprintf("%d new character(s) since the last poll (new_output)", n))
	case !j.Status.Terminal():
		notes = append(notes, "no new output")
	}
	if fresh.Note != "" {
		notes = append(notes, "new output: "+fresh.Note)
	}
	if r.Offloaded {
		notes = append(notes, fmt.Sprintf("output offloaded to %s (read it with your file tools, or action=log)", r.OutputFilePath))
	} else if tr.out.OmittedBefore > 0 {
		notes = append(notes, fmt.Sprintf("the last %d characters; action=log reads the rest", utf8.RuneCountInString(tr.out.Text)))
	}
	if offNote != "" {
		notes = append(notes, offNote)
	}
	switch {
	case j.Status.Terminal() && fresh.OmittedAfter == 0:
		notes = append(notes, "finished; all output read")
	case j.Status.Terminal():
	case j.WaitingForInput:
		notes = append(notes, "answer with action=write")
	default:
		notes = append(notes, fmt.Sprintf("action=wait returns when it ends or asks for input (else poll in %s)", round(retry)))
	}
	r.Note = strings.Join(notes, "; ")
	return resultWith(summary(j)+". "+r.Note, &r.OutputInfo, r)
}

// lastChars reads the last n characters of the cleaned output, as the
// documents' poll returns them ("return last 500 chars"): the engine's
// tail starts at a line, so when the line before it would complete the n
// characters, its end is read too. With grep, the last n characters of
// the matching lines.
func (s *server) lastChars(ctx context.Context, id string, n int64, grep string) (pollResultOf, error) {
	pr, err := s.c.Poll(ctx, id, jobs.PollOptions{Tail: n, Grep: grep})
	if err != nil {
		return pollResultOf{}, describe(id, err)
	}
	out := viewOutput(pr.Output)
	short := n - int64(utf8.RuneCountInString(out.Text))
	if grep == "" && short > 0 && out.OmittedBefore > 0 && out.Start > 0 {
		from := max(0, out.Start-max(4*short, 4096))
		o, err := s.c.Log(ctx, id, jobs.Range{ByteRange: true, Offset: from, Limit: out.Start - from, Clean: true})
		if err == nil && o.Text != "" {
			before, _ := textclean.TailChars(o.Text, int(short))
			k := int64(len(before))
			out.Text = before + out.Text
			out.Start = max(from, out.Start-k)
			out.OmittedBefore = max(0, out.OmittedBefore-k)
			nl := int64(strings.Count(before, "\n"))
			out.FirstLine -= nl
			out.Lines += nl
			out.Truncated = true
		}
	}
	return pollResultOf{pr.Job, out}, nil
}

// logResult is log's structured result: the page as the output string,
// and where it lies in output_info (a charPage with unit=chars, else the
// output view).
type logResult struct {
	SessionID      string `json:"sessionId"`
	Status         string `json:"status,omitempty"`
	Unit           string `json:"unit"`
	Output         string `json:"output"`
	Offloaded      bool   `json:"offloaded"`
	OutputFilePath string `json:"outputFilePath,omitempty"`
	OutputInfo     any    `json:"output_info"`
}

func (s *server) log(ctx context.Context, ref string, in processInput) (*sdk.CallToolResult, any, error) {
	if in.Offset != nil && *in.Offset < 0 {
		return nil, nil, argError("offset must not be negative, got %d", *in.Offset)
	}
	if in.Limit != nil && *in.Limit < 0 {
		return nil, nil, argError("limit must not be negative, got %d", *in.Limit)
	}
	unit := in.Unit
	if unit == "" || unit == "chars" {
		return s.logChars(ctx, ref, in)
	}
	r := jobs.Range{Stream: jobs.Stream(in.Stream), Grep: in.Grep, Clean: true}
	var notes []string
	limit := int64(0)
	if in.Limit != nil {
		limit = int64(*in.Limit)
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
			r.FromLine, r.Lines = int64(*in.Offset)+1, limit
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
			r.Offset = int64(*in.Offset)
		}
		r.Limit = limit
	default:
		return nil, nil, argError("unit must be chars, lines or bytes, got %q", unit)
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
		next = out.FirstLine - jobs.FirstLine + out.Lines // an offset: lines from 0
		if next < out.TotalLines || out.OmittedAfter > 0 {
			out.NextOffset = &next
			notes = append(notes, fmt.Sprintf("more after: continue with offset=%d", next))
		}
		if out.Lines > 0 {
			notes = append(notes, fmt.Sprintf("lines %d-%d of %d shown (offset %d)", out.FirstLine, out.FirstLine+out.Lines-1, out.TotalLines, out.FirstLine-jobs.FirstLine))
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
		notes = append(notes, fmt.Sprintf("%s inside this range %s", size(out.Evicted), gapWords(out)))
	}
	if out.CutLines > 0 {
		notes = append(notes, cutLinesNote(out))
	}
	res := logResult{SessionID: o.JobID, Unit: unit, Output: out.Text, OutputInfo: &out}
	if note := s.logState(ctx, ref, &res); note != "" {
		notes = append(notes, note)
	}
	out.Note = strings.Join(notes, "; ")
	line := fmt.Sprintf("log of session %s: %s", textclean.Echo(ref), out.Note)
	return resultWith(line, &out, res)
}

// logState fills in the job's status and offloaded file for a log page,
// and returns a note about the file; an error reading the job leaves them
// empty.
func (s *server) logState(ctx context.Context, ref string, res *logResult) string {
	j, err := s.c.Get(ctx, ref)
	if err != nil {
		return ""
	}
	res.SessionID, res.Status = j.ID, openclawStatus(j.Status)
	var note string
	res.Offloaded, res.OutputFilePath, note = s.offloaded(ctx, j)
	if res.Offloaded {
		return "the whole output is also in " + res.OutputFilePath
	}
	return note
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
		n, err := s.c.Write(ctx, ref, data)
		r.Written = n
		if errors.Is(err, jobs.ErrNotReading) && in.EOF {
			// eof works whether or not the job reads.
			if cerr := s.c.CloseStdin(ctx, ref); cerr == nil {
				return nil, nil, fmt.Errorf("%w; stdin closed as asked", describe(ref, err))
			}
		}
		if err != nil {
			return nil, nil, describe(ref, err)
		}
	}
	if in.EOF {
		if err := s.c.CloseStdin(ctx, ref); err != nil {
			return nil, nil, describe(ref, err)
		}
		r.StdinClosed = true
	}
	line := fmt.Sprintf("wrote %s to the stdin of session %s", size(int64(r.Written)), textclean.Echo(ref))
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
		return nil, nil, argError("send_keys needs keys: key names are pressed and other text is typed, e.g. [\"print(6*7)\", \"Enter\"]")
	}
	if err := s.c.SendKeys(ctx, ref, in.Keys, in.Literal); err != nil {
		return nil, nil, describe(ref, err)
	}
	return result(fmt.Sprintf("sent %d key(s) to session %s; see the screen with action=capture", len(in.Keys), textclean.Echo(ref)),
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
		scrollback = int64(*in.Scrollback)
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
	line := fmt.Sprintf("screen of session %s", textclean.Echo(ref))
	if r.Note != "" {
		line += "; " + r.Note
	}
	return resultWith(line, &outputView{Text: text}, r)
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
	Unreached   string `json:"unreached,omitempty"`
}

func viewKill(k jobs.KillResult) killResult {
	r := killResult{
		SessionID:   k.JobID,
		Signalled:   k.Signalled,
		Survivors:   k.Survivors,
		Escalated:   k.Escalated,
		AlreadyDone: k.AlreadyDone,
		Unreached:   k.Unreached,
	}
	if k.Status != "" {
		r.Status = openclawStatus(k.Status)
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
	case k.AlreadyDone && len(k.Signalled) == 0:
		fmt.Fprintf(&b, "; it had already finished (%s), nothing to kill", k.Status)
	case k.AlreadyDone:
		fmt.Fprintf(&b, "; it had already finished (%s); ended %d process(es) it left running %v", k.Status, len(k.Signalled), k.Signalled)
		if k.Escalated {
			b.WriteString(", SIGKILL was needed after the grace period")
		}
	case len(k.Signalled) > 0:
		fmt.Fprintf(&b, "; signalled %d process(es) %v", len(k.Signalled), k.Signalled)
		if k.Escalated {
			b.WriteString(", SIGKILL was needed after the grace period")
		}
	}
	if len(k.Survivors) > 0 {
		fmt.Fprintf(&b, "; WARNING: %d process(es) survived SIGKILL: %v", len(k.Survivors), k.Survivors)
	}
	if k.Unreached != "" {
		b.WriteString("; " + k.Unreached)
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
	return result(fmt.Sprintf("sent %s to %d process(es) of session %s %v; check with action=poll", r.Signal, len(pids), textclean.Echo(ref), pids), r)
}

func (s *server) kill(ctx context.Context, ref, sig string) (*sdk.CallToolResult, any, error) {
	// The engine's one decision (jobs.Client.KillSignal): none, TERM and
	// KILL end the job; any other signal is sent once.
	k, err := s.c.KillSignal(ctx, ref, strings.TrimSpace(sig), 0)
	if err != nil {
		return nil, nil, describe(ref, err)
	}
	if k.Signal != "" {
		r := killResult{SessionID: ref, Status: openclawStatus(k.Status), Signal: k.Signal, Signalled: k.Signalled}
		return result(fmt.Sprintf("sent %s to %d process(es) of session %s %v; check with action=poll", r.Signal, len(r.Signalled), textclean.Echo(ref), r.Signalled), r)
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
	if s.off != nil {
		if j, err := s.c.Get(ctx, ref); err == nil {
			s.off.clear(ctx, j.ID)
		}
	}
	return result(fmt.Sprintf("cleared the stored output of session %s (new output is still recorded; offsets stay absolute)", textclean.Echo(ref)),
		clearResult{SessionID: ref, Cleared: true})
}

func (s *server) remove(ctx context.Context, ref string) (*sdk.CallToolResult, any, error) {
	id := ref
	if j, err := s.c.Get(ctx, ref); err == nil {
		id = j.ID
	}
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
	if s.off != nil {
		s.off.remove(id)
	}
	verb := "removed"
	if len(r.Signalled) > 0 {
		verb = "killed and removed"
	}
	r.AlreadyDone = false
	return result(killLine(verb, r), r)
}

// sessionState is one of several awaited sessions in wait's result.
type sessionState struct {
	SessionID       string `json:"sessionId"`
	Status          string `json:"status"`
	ExitCode        *int   `json:"exitCode,omitempty"`
	RuntimeMs       int64  `json:"runtime_ms"`
	WaitingForInput bool   `json:"waiting_for_input,omitempty"`
	// Output is the newest output of an ended session that is not the
	// one the result is about: each ended job's tail is in the answer,
	// so a failure costs no second call.
	Output *string `json:"output,omitempty"`
}

func (s *server) wait(ctx context.Context, req *sdk.CallToolRequest, in processInput) (*sdk.CallToolResult, any, error) {
	var refs []string
	for _, ref := range append([]string{in.SessionID}, in.SessionIDs...) {
		if ref = strings.TrimSpace(ref); ref != "" && !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	switch {
	case len(refs) == 0:
		return nil, nil, argError("wait needs sessionId (or sessionIds for several; process action=list shows the sessions)")
	case len(refs) > maxWaitJobs:
		return nil, nil, argError("wait takes at most %d sessions, got %d", maxWaitJobs, len(refs))
	}
	var notes []string
	timeout := s.bound
	if in.Timeout != nil {
		d, err := seconds("timeout", *in.Timeout)
		if err != nil {
			return nil, nil, err
		}
		timeout = d
	}
	if timeout <= 0 || timeout > s.bound {
		notes = append(notes, fmt.Sprintf("timeout capped at %s (the call bound)", round(s.bound)))
		timeout = s.bound
	}
	// The model reads cleaned text: until matches that text.
	o := jobs.WaitOptions{Timeout: timeout, Until: in.Until, Clean: true, Any: !in.All, Input: true, Progress: s.progress(ctx, req, timeout)}
	if in.Idle != nil {
		d, err := seconds("idle", *in.Idle)
		if err != nil {
			return nil, nil, err
		}
		o.Idle = d
	}
	start := time.Now()
	wr, err := s.c.Wait(ctx, refs, o)
	if err != nil {
		if len(refs) == 1 {
			return nil, nil, describe(refs[0], err)
		}
		return nil, nil, err
	}
	if len(wr.Jobs) == 0 {
		return nil, nil, &sessionError{refs[0], "not found", jobs.ErrNotFound}
	}
	// The result is about the job that ended the wait (or the only one);
	// of several that ended together, a failed one first.
	j := wr.Jobs[0]
	for _, w := range wr.Jobs {
		if w.ID == wr.JobID {
			j = w
		}
	}
	if wr.Reason == jobs.WaitExited && j.Status == jobs.StatusDone {
		for _, w := range wr.Jobs {
			if w.Status.Terminal() && w.Status != jobs.StatusDone {
				j = w
				break
			}
		}
	}
	for _, w := range wr.Jobs {
		s.backoff.reset(w.ID)
	}
	// The output is what the caller has not read yet (execute_command's
	// window and poll read some): a finished job's newest resultChars, a
	// running one's newest waitChars, from a line start.
	chars := int64(waitChars)
	if j.Status.Terminal() {
		chars = resultChars / int64(len(refs))
	}
	pr, err := s.readNew(ctx, j.ID, chars)
	if err != nil {
		return nil, nil, err
	}
	out := pr.out
	r := newPollResult(j, out)
	var offNote string
	r.Offloaded, r.OutputFilePath, offNote = s.offloaded(ctx, j)
	if offNote != "" {
		notes = append(notes, offNote)
	}
	r.WaitReason, r.Match = string(wr.Reason), cutEnd(textclean.Clean([]byte(wr.Match)), 1000)
	if wr.Reason == jobs.WaitInput {
		r.WaitingForInput = true
	}
	if out.Note != "" {
		notes = append(notes, out.Note)
	}
	waited := round(time.Since(start))
	var why string
	switch wr.Reason {
	case jobs.WaitExited:
		why = "finished"
		if len(refs) > 1 && !in.All {
			why = j.ID + " finished first"
		} else if len(refs) > 1 {
			why = "all finished"
		}
	case jobs.WaitMatched:
		why = fmt.Sprintf("output matched \"%s\" after %s: %s", textclean.Echo(in.Until), waited, r.Match)
	case jobs.WaitIdle:
		why = fmt.Sprintf("output silent for %s", round(o.Idle))
	case jobs.WaitInput:
		why = "it waits for input: answer with action=write"
	default:
		why = fmt.Sprintf("still running after %s; call wait again to keep waiting", waited)
	}
	line := summary(j) + ". wait: " + why
	var tails []sdk.Content
	if len(refs) > 1 {
		var others []string
		// The other ended sessions' tails, failed ones first, within the
		// same budget per session as the first.
		ended := slices.Clone(wr.Jobs)
		slices.SortStableFunc(ended, func(a, b jobs.Job) int {
			return cmpBool(a.Status == jobs.StatusDone, b.Status == jobs.StatusDone)
		})
		tailOf := map[string]*string{}
		for _, w := range ended {
			if w.ID == j.ID || !w.Status.Terminal() {
				continue
			}
			pr, err := s.readNew(ctx, w.ID, resultChars/int64(len(refs)))
			if err != nil {
				continue // removed meanwhile: its state below says enough
			}
			text := pr.out.Text
			tailOf[w.ID] = &text
			if text != "" {
				tails = append(tails, &sdk.TextContent{Text: "--- " + shortState(w) + ":\n" + text})
			}
		}
		for _, w := range wr.Jobs {
			r.Sessions = append(r.Sessions, sessionState{SessionID: w.ID, Status: openclawStatus(w.Status), ExitCode: w.ExitCode,
				RuntimeMs: w.Runtime.Milliseconds(), WaitingForInput: w.WaitingForInput, Output: tailOf[w.ID]})
			if w.Status.Terminal() {
				r.Ended = append(r.Ended, w.ID)
			}
			if w.ID != j.ID {
				others = append(others, shortState(w))
			}
		}
		line += "; others: " + strings.Join(others, ", ")
	}
	r.Note = strings.Join(notes, "; ")
	if r.Note != "" {
		line += "; " + r.Note
	}
	res, v, err := resultWith(line, &r.OutputInfo, r)
	if res != nil {
		res.Content = append(res.Content, tails...)
	}
	return res, v, err
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// shortState is a job's status in a few words, for a list of several.
func shortState(j jobs.Job) string {
	st := openclawStatus(j.Status)
	switch {
	case j.ExitCode != nil:
		st = fmt.Sprintf("%s (exit %d)", st, *j.ExitCode)
	case j.WaitingForInput:
		st += " (waits for input)"
	}
	return j.ID + " " + st
}
