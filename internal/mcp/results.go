package mcp

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// openclawStatus is a job's status in OpenClaw's words: running,
// done, error or killed. A job that is still starting counts as running;
// one that exited non-zero, never started or was lost (its supervisor
// died) is error; one ended by its timeout was killed, as the original interfaces' maximum
// runtime kills. The engine's finer word is kept in reason ("timed out
// after 30m0s", "supervisor … lost track of it").
func openclawStatus(st jobs.Status) string {
	switch st {
	case jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning:
		return "running"
	case jobs.StatusDone:
		return "done"
	case jobs.StatusKilled, jobs.StatusTimedOut:
		return "killed"
	}
	return "error"
}

// jobView is a job as the model sees it: the original interfaces' sessionId, exitCode
// and status words, times in milliseconds, the command cut to a readable
// length.
type jobView struct {
	SessionID       string   `json:"sessionId"`
	Name            string   `json:"name,omitempty"`
	Label           string   `json:"label,omitempty"`
	Command         string   `json:"command"`
	Argv            []string `json:"argv,omitempty"`
	Status          string   `json:"status"`
	ExitCode        *int     `json:"exitCode,omitempty"`
	Signal          string   `json:"signal,omitempty"`
	Reason          string   `json:"reason,omitempty"`
	PID             int      `json:"pid,omitempty"`
	Mode            string   `json:"mode,omitempty"`
	TmuxSession     string   `json:"tmux_session,omitempty"`
	Cwd             string   `json:"cwd,omitempty"`
	EnvNames        []string `json:"env_names,omitempty"`
	Stdin           string   `json:"stdin,omitempty"`
	CreatedAt       string   `json:"created_at,omitempty"`
	EndedAt         string   `json:"ended_at,omitempty"`
	RuntimeMs       int64    `json:"runtime_ms"`
	TimeoutMs       int64    `json:"timeout_ms,omitempty"`
	OutputBytes     int64    `json:"output_bytes"`
	OutputLines     int64    `json:"output_lines"`
	EvictedBytes    int64    `json:"evicted_bytes,omitempty"`
	DroppedBytes    int64    `json:"dropped_bytes,omitempty"`
	LastOutputAt    string   `json:"last_output_at,omitempty"`
	WaitingForInput bool     `json:"waiting_for_input"`
	Stopped         bool     `json:"stopped,omitempty"`
	Descendants     int      `json:"descendants,omitempty"`
}

// maxCommandChars bounds the command shown in a listing.
const maxCommandChars = 300

func viewJob(j jobs.Job, full bool) jobView {
	v := jobView{
		SessionID:       j.ID,
		Name:            j.Name,
		Label:           j.Label,
		Command:         commandLine(j),
		Status:          openclawStatus(j.Status),
		ExitCode:        j.ExitCode,
		Signal:          j.Signal,
		Reason:          j.Reason,
		PID:             j.PID,
		RuntimeMs:       j.Runtime.Milliseconds(),
		OutputBytes:     j.OutputBytes,
		OutputLines:     j.OutputLines,
		EvictedBytes:    j.EvictedBytes,
		DroppedBytes:    j.DroppedBytes,
		WaitingForInput: j.WaitingForInput,
		Stopped:         j.Stopped,
		Descendants:     j.Descendants,
	}
	if j.Mode == jobs.ModePTY {
		v.Mode = string(j.Mode)
	}
	if j.Mode == jobs.ModeTmux {
		v.Mode, v.TmuxSession = string(j.Mode), j.TmuxSession
	}
	if !full {
		v.Command = cutEnd(v.Command, maxCommandChars)
		return v
	}
	v.Cwd, v.EnvNames, v.Stdin, v.Argv = j.Cwd, j.EnvNames, j.Stdin, j.Argv
	v.TimeoutMs = j.Timeout.Milliseconds()
	v.CreatedAt = stamp(&j.CreatedAt)
	v.EndedAt = stamp(j.EndedAt)
	v.LastOutputAt = stamp(j.LastOutputAt)
	return v
}

func commandLine(j jobs.Job) string {
	if j.Command != "" || len(j.Argv) == 0 {
		return j.Command
	}
	return strings.Join(j.Argv, " ")
}

func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// outputView is a piece of output and what it left out. Its text is the
// original interfaces' output string, a field of the result of its own; the rest is
// the result's output_info.
type outputView struct {
	Text string `json:"-"`
	// Start and End are the absolute byte offsets covered.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// FirstLine is the line of the first byte, from 1 as everywhere (log's
	// offset with unit=lines counts from 0, as the original's does: line
	// FirstLine is offset FirstLine-1); Lines how many lines end in Text.
	FirstLine int64 `json:"first_line"`
	Lines     int64 `json:"lines"`
	// NextOffset is the offset to pass to log to continue reading: a
	// character with unit=chars, a line with unit=lines, a byte with
	// unit=bytes.
	NextOffset *int64 `json:"next_offset,omitempty"`
	TotalBytes int64  `json:"total_bytes"`
	TotalLines int64  `json:"total_lines"`
	// OmittedBefore and OmittedAfter count bytes of the job's output not
	// in Text; Evicted counts bytes of this range the output cap or a clear
	// removed.
	OmittedBefore int64 `json:"omitted_before"`
	OmittedAfter  int64 `json:"omitted_after"`
	Evicted       int64 `json:"evicted,omitempty"`
	// EvictedTotal and DroppedTotal are the job's bytes removed by the cap
	// or a clear, and dropped on a full disk; CutLines the lines longer
	// than the grep bound that were searched in part.
	EvictedTotal int64 `json:"evicted_total,omitempty"`
	DroppedTotal int64 `json:"dropped_total,omitempty"`
	CutLines     int64 `json:"cut_lines,omitempty"`
	Truncated    bool  `json:"truncated"`
	// Skipped counts new bytes a poll passed over to show the newest,
	// from offset SkippedFrom.
	Skipped     int64 `json:"skipped,omitempty"`
	SkippedFrom int64 `json:"skipped_from,omitempty"`
	// Note says in words what was left out and how to read it.
	Note string `json:"note,omitempty"`
}

func viewOutput(o jobs.Output) outputView {
	return outputView{
		Text:          o.Text,
		Start:         o.Start,
		End:           o.End,
		FirstLine:     o.FirstLine,
		Lines:         o.Lines,
		TotalBytes:    o.TotalBytes,
		TotalLines:    o.TotalLines,
		OmittedBefore: o.OmittedBefore,
		OmittedAfter:  o.OmittedAfter,
		Evicted:       o.Evicted,
		EvictedTotal:  o.EvictedTotal,
		DroppedTotal:  o.DroppedTotal,
		CutLines:      o.CutLines,
		Truncated:     o.Truncated,
		Skipped:       o.Skipped,
		SkippedFrom:   o.SkippedFrom,
	}
}

// tailNote says what a tail read (a finished command, wait) of
// job id left out and how to read it.
func tailNote(id string, o outputView) string {
	var parts []string
	if o.OmittedBefore > 0 {
		parts = append(parts, fmt.Sprintf("%s of earlier output not shown here (read it with process action=log sessionId=%s, e.g. offset=0)", size(o.OmittedBefore), id))
	}
	if o.Evicted > 0 {
		parts = append(parts, fmt.Sprintf("%s in this range %s", size(o.Evicted), gapWords(o)))
	} else if o.DroppedTotal > 0 {
		parts = append(parts, fmt.Sprintf("%s of the output was dropped because the disk was full", size(o.DroppedTotal)))
	}
	if o.CutLines > 0 {
		parts = append(parts, cutLinesNote(o))
	}
	return strings.Join(parts, "; ")
}

// gapWords names the bytes missing inside a range after what the job can
// have lost.
func gapWords(o outputView) string {
	switch {
	case o.DroppedTotal == 0:
		return "was removed by the output cap or a clear"
	case o.EvictedTotal == 0:
		return "was dropped because the disk was full"
	}
	return "was removed by the output cap or a clear, or dropped because the disk was full"
}

// cutLinesNote says that grep searched long lines in part.
func cutLinesNote(o outputView) string {
	return fmt.Sprintf("truncated: %d line(s) longer than %s were searched and shown in part", o.CutLines, size(jobs.MaxGrepLine))
}

// size formats a byte count for a model to read: in words below 1 KiB,
// else as every front end writes sizes (parse.FormatSize: KiB, MiB …).
func size(n int64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	}
	return parse.FormatSize(n)
}

// round formats a duration for a model to read.
func round(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// summary is the one line that says where a job is.
// queueIn names a queued job's queue for a note: " in queue NAME", or ""
// for the scope's own.
func queueIn(j jobs.Job) string {
	if j.Queue == "" {
		return ""
	}
	return " in queue " + textclean.Escape(j.Queue)
}

func summary(j jobs.Job) string {
	name := j.ID
	if j.Name != "" {
		name += " (" + textclean.Escape(j.Name) + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "session %s: %s", name, openclawStatus(j.Status))
	switch {
	case j.ExitCode != nil && j.Signal != "":
		fmt.Fprintf(&b, " (exit %d, signal %s)", *j.ExitCode, j.Signal)
	case j.ExitCode != nil:
		fmt.Fprintf(&b, " (exit %d)", *j.ExitCode)
	case j.Signal != "":
		fmt.Fprintf(&b, " (signal %s)", j.Signal)
	}
	if j.Status.Terminal() {
		fmt.Fprintf(&b, " after %s", round(j.Runtime))
	} else {
		fmt.Fprintf(&b, " for %s", round(j.Runtime))
	}
	fmt.Fprintf(&b, ", %s of output", size(j.OutputBytes))
	if j.Reason != "" && j.Reason != string(j.Status) && j.Reason != openclawStatus(j.Status) {
		fmt.Fprintf(&b, "; %s", textclean.Escape(j.Reason))
	}
	if j.Stopped {
		b.WriteString("; stopped (use action=resume to continue it)")
	}
	if j.WaitingForInput {
		b.WriteString("; waiting for input on stdin (use action=write)")
	}
	if j.Descendants > 0 {
		fmt.Fprintf(&b, "; %d process(es) of the job still alive (action=kill ends them)", j.Descendants)
	}
	return b.String()
}

// result is a tool result: one short line for the model, and the
// structured value (offsets, counts) as structured content only.
func result(line string, v any) (*sdk.CallToolResult, any, error) {
	return resultWith(line, nil, v)
}

// resultWith is result with a piece of output: its text follows the line
// as a plain text block of its own, as the job wrote it (cleaned, never
// JSON-escaped), so the model reads "a && b <c>" as such.
func resultWith(line string, out *outputView, v any) (*sdk.CallToolResult, any, error) {
	content := []sdk.Content{&sdk.TextContent{Text: line}}
	if out != nil && out.Text != "" {
		content = append(content, &sdk.TextContent{Text: out.Text})
	}
	return &sdk.CallToolResult{Content: content}, v, nil
}

// cutStart keeps the last max bytes of s (on a rune boundary) and reports
// how many bytes it dropped.
func cutStart(s string, max int) (string, int) {
	if len(s) <= max {
		return s, 0
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:], i
}

// cutEnd keeps the first max bytes of s (on a rune boundary), marking the
// cut.
func cutEnd(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
