package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) statusCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "status",
		Usage:     "show all of a job's metadata and its status history",
		ArgsUsage: "ID",
		Action:    r.status,
	}
}

// statusResult is the JSON of jobs status.
type statusResult struct {
	Job    jobs.Job     `json:"job"`
	Events []jobs.Event `json:"events"`
}

func (r *runner) status(cc *ucli.Context) error {
	ref, c, err := r.refAndClient(cc)
	if err != nil {
		return err
	}
	j, err := c.Get(cc.Context, ref)
	if err != nil {
		return err
	}
	if multi(cc) {
		for _, s := range r.srcs {
			if s.c == c {
				j.Host = s.hostOf(j)
			}
		}
	}
	evs, err := c.History(cc.Context, j.ID)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []jobs.Event{}
	}
	if jsonOut(cc) {
		return r.printJSON(statusResult{Job: j, Events: evs})
	}
	fmt.Fprint(r.stdout, formatStatus(j, evs, time.Now(), r.paint()))
	return nil
}

// formatStatus renders every field of a job as "key  value" lines, then
// the transition history.
func formatStatus(j jobs.Job, evs []jobs.Event, now time.Time, pt painter) string {
	var t table
	add := func(k, v string) {
		if v != "" {
			t.add(pt.dim(k), v)
		}
	}
	add("id", pt.bold(j.ID))
	add("name", shown(j.Name))
	add("label", shown(j.Label))
	add("scope", shown(j.Scope))
	add("status", pt.status(j.Status, statusText(j)))
	if j.Status.Terminal() {
		add("exit", strings.TrimPrefix(exitText(j), "exit "))
	}
	add("reason", shown(oneLine(j.Reason)))
	add("command", commandText(j))
	add("cwd", shown(j.Cwd))
	if len(j.EnvNames) > 0 {
		add("env", shown(strings.Join(j.EnvNames, " ")))
	}
	add("mode", string(j.Mode))
	add("tmux", shown(j.TmuxSession))
	add("stdin", j.Stdin)
	if j.PID > 0 {
		pid := fmt.Sprintf("%d (group %d)", j.PID, j.PGID)
		if j.MainExited && !j.Status.Terminal() {
			pid += ", exited"
		}
		add("pid", pid)
	}
	add("supervisor", shown(j.Supervisor))
	add("host", shown(j.Host))
	add("created", formatTime(now, j.CreatedAt))
	if j.StartedAt != nil {
		add("started", formatTime(now, *j.StartedAt))
	}
	if j.EndedAt != nil {
		add("ended", formatTime(now, *j.EndedAt))
	}
	add("runtime", formatDuration(j.Runtime))
	add("timeout", formatLimit(j.Timeout, "none"))
	ttl := formatLimit(j.TTL, "forever")
	if j.TTL > 0 && j.Status.Terminal() {
		ttl += fmt.Sprintf(" (expires %s)", formatIn(now, j.LastAccess.Add(j.TTL)))
	}
	add("ttl", ttl)
	out := fmt.Sprintf("%s, %s", parse.FormatSize(j.OutputBytes), plural(j.OutputLines, "line", "lines"))
	if j.MaxOutput > 0 {
		out += fmt.Sprintf(" (cap %s)", parse.FormatSize(j.MaxOutput))
	}
	add("output", out)
	if j.EvictedBytes > 0 {
		add("evicted", parse.FormatSize(j.EvictedBytes))
	}
	if j.DroppedBytes > 0 {
		add("dropped", parse.FormatSize(j.DroppedBytes)+" the database could not take")
	}
	if j.LastOutputAt != nil {
		add("last output", formatTime(now, *j.LastOutputAt))
	}
	add("read cursor", fmt.Sprint(j.ReadCursor))
	if j.Status.Terminal() {
		add("cpu", fmt.Sprintf("user %s, sys %s", formatDuration(j.UserCPU), formatDuration(j.SysCPU)))
		if j.MaxRSSKB > 0 {
			add("max rss", parse.FormatSize(j.MaxRSSKB<<10))
		}
	}
	if j.WaitingForInput {
		add("input", "waiting for input on stdin")
	}
	if j.Descendants > 0 {
		add("descendants", fmt.Sprintf("%d still alive", j.Descendants))
	}
	add("on exit", shown(j.OnExit))
	var b strings.Builder
	b.WriteString(t.render())
	b.WriteString("\n" + pt.dim("history") + "\n")
	var h table
	for _, e := range evs {
		what := shown(e.Kind)
		if e.Kind == "transition" {
			from := string(e.From)
			if from == "" {
				from = "·"
			}
			what = from + " → " + pt.status(e.To, string(e.To))
		}
		h.add("  "+e.At.Local().Format("15:04:05.000"), what, detailText(e.Detail))
	}
	if len(evs) == 0 {
		b.WriteString("  (none)\n")
	}
	b.WriteString(h.render())
	return b.String()
}

// formatIn renders a future time as "in 5m" ("now" once passed).
func formatIn(now, t time.Time) string {
	d := t.Sub(now)
	if d < time.Second {
		return "now"
	}
	return "in " + strings.TrimSuffix(formatAge(now, now.Add(-d)), " ago")
}

// detailText renders an event's JSON detail as "k=v k=v", keys sorted.
func detailText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return shown(string(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		var s string
		switch x := v.(type) {
		case string:
			s = x
			if strings.ContainsAny(s, " \t") {
				s = fmt.Sprintf("%q", s)
			}
		case float64:
			s = fmt.Sprint(x)
		default:
			b, _ := json.Marshal(x)
			s = string(b)
		}
		parts = append(parts, k+"="+s)
	}
	return truncate(shown(strings.Join(parts, " ")), 120)
}
