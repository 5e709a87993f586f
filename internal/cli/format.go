package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// shown is text a user or a job gave (a name, label, scope, command, path,
// reason, a line of output) as human output prints it: control characters,
// C1 controls, bidi overrides and invalid UTF-8 written as visible escapes
// (textclean.Escape), so that nothing stored in the database can drive the
// reader's terminal. Every formatter passes such text through here; --json
// prints it exactly.
func shown(s string) string { return textclean.Escape(s) }

// formatDuration renders a runtime compactly: "0s", "850ms", "3.2s", "4m05s",
// "2h03m", "3d04h".
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatAge renders how long ago t was: "just now", "3s ago", "5m ago",
// "2h ago", "4d ago".
func formatAge(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// formatTime renders a timestamp in local time with its age.
func formatTime(now, t time.Time) string {
	return fmt.Sprintf("%s (%s)", t.Local().Format("2006-01-02 15:04:05"), formatAge(now, t))
}

// formatLimit renders a duration setting where 0 means none: "30m",
// "1h30m", "90s".
func formatLimit(d time.Duration, zero string) string {
	if d <= 0 {
		return zero
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// commandText renders the job's command as one line a shell would accept,
// shown (control characters escaped).
func commandText(j jobs.Job) string {
	if len(j.Argv) > 0 && j.Command == "" {
		q := make([]string, len(j.Argv))
		for i, a := range j.Argv {
			q[i] = textclean.ShellQuote(a)
		}
		return shown(strings.Join(q, " "))
	}
	if j.Command != "" {
		return shown(j.Command)
	}
	return shown(strings.Join(j.Argv, " "))
}

// truncate shortens s to at most n characters, ending in "…" when cut, and
// folds it onto one line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// exitText describes how a finished job ended: "exit 0", "signal TERM".
func exitText(j jobs.Job) string {
	switch {
	case j.ExitCode != nil && j.Signal == "":
		return fmt.Sprintf("exit %d", *j.ExitCode)
	case j.Signal != "":
		return "signal " + strings.TrimPrefix(strings.ToUpper(j.Signal), "SIG")
	}
	return ""
}

// statusText is the status with what matters about it right now:
// "running (waiting for input)", "running (stopped)", "failed (exit 2)",
// "lost (3 processes alive)".
func statusText(j jobs.Job) string {
	s := string(j.Status)
	var extra []string
	if e := exitText(j); e != "" && j.Status != jobs.StatusDone {
		extra = append(extra, e)
	} else if j.Status == jobs.StatusFailed && j.StartedAt == nil && strings.HasPrefix(j.Reason, "dependency ") {
		extra = append(extra, oneLine(j.Reason)) // the engine's words: "dependency X failed"
	} else if j.Status == jobs.StatusFailed && j.StartedAt == nil {
		extra = append(extra, "could not start")
	}
	if j.Status == jobs.StatusQueued && j.QueuePosition > 0 {
		extra = append(extra, fmt.Sprintf("#%d in %s", j.QueuePosition, queueName(j.Queue)))
	}
	if j.Stopped {
		extra = append(extra, "stopped")
	}
	if j.WaitingForInput {
		extra = append(extra, "waiting for input")
	}
	if j.MainExited && !j.Status.Terminal() {
		extra = append(extra, "main process exited, "+plural(int64(j.Descendants), "process left", "processes left"))
	}
	if j.Descendants > 0 && j.Status.Terminal() {
		extra = append(extra, plural(int64(j.Descendants), "process alive", "processes alive"))
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// jobTitle is the name and the label, "name (label)" when the job has
// both, each shown and cut to n characters; "-" when it has neither.
func jobTitle(j jobs.Job, n int) string {
	switch {
	case j.Name != "" && j.Label != "":
		return truncate(shown(j.Name), n) + " (" + truncate(shown(j.Label), n) + ")"
	case j.Name != "":
		return truncate(shown(j.Name), n)
	case j.Label != "":
		return truncate(shown(j.Label), n)
	}
	return "-"
}

// painter colours text for a terminal; the zero value does not colour.
type painter struct{ on bool }

// newPainter colours only when f is a terminal, NO_COLOR is unset and
// TERM is not "dumb".
func newPainter(f *os.File) painter {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return painter{}
	}
	return painter{on: isTerminal(f)}
}

func (p painter) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// status colours a status word: green done, cyan running, red failures,
// yellow killed and lost.
func (p painter) status(st jobs.Status, s string) string {
	switch st {
	case jobs.StatusDone:
		return p.paint("32", s)
	case jobs.StatusRunning, jobs.StatusStarting, jobs.StatusQueued:
		return p.paint("36", s)
	case jobs.StatusFailed, jobs.StatusTimedOut:
		return p.paint("31", s)
	case jobs.StatusKilled, jobs.StatusLost:
		return p.paint("33", s)
	}
	return s
}

func (p painter) dim(s string) string  { return p.paint("2", s) }
func (p painter) bold(s string) string { return p.paint("1", s) }

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	return st.Mode()&os.ModeCharDevice != 0
}

// table aligns columns of text. Cells may hold colour escapes; widths are
// measured without them.
type table struct {
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// render writes the rows with two spaces between columns; the last column
// is not padded.
func (t *table) render() string {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			if w := visibleWidth(c); w > widths[i] {
				widths[i] = w
			}
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-visibleWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	return trimLines(b.String())
}

// trimLines drops the padding left at the end of lines by empty cells.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// visibleWidth counts the characters of s that take space on screen.
func visibleWidth(s string) int {
	n := 0
	esc := false
	for _, r := range s {
		switch {
		case esc:
			if r == 'm' {
				esc = false
			}
		case r == '\x1b':
			esc = true
		default:
			n++
		}
	}
	return n
}

func sortStrings(s []string) { sort.Strings(s) }
