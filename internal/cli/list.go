package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

var allStatuses = []jobs.Status{
	jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning, jobs.StatusDone, jobs.StatusFailed,
	jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost,
}

func (r *runner) listCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the scope's jobs, newest first",
		Description: "Lists the newest jobs that fit a screen (20 on a terminal, 50 otherwise) and says how\n" +
			"many more there are; --limit N shows N, --all every one. --json prints a page\n" +
			"{\"jobs\": […], \"more\": N, \"next_cursor\": C}: pass C to --cursor for the next page.\n" +
			"--name, --label and --command keep jobs whose field contains the text.",
		Flags: []ucli.Flag{
			&ucli.StringSliceFlag{Name: "status", Usage: "only jobs in `STATUS` (repeatable or comma separated; 'active' = queued,starting,running; 'finished' = the rest)"},
			&ucli.StringFlag{Name: "since", Usage: "only jobs created in the last `DURATION` (e.g. 30m, 2h)"},
			&ucli.StringFlag{Name: "name", Usage: "only jobs whose name contains `TEXT`"},
			&ucli.StringFlag{Name: "label", Usage: "only jobs whose label contains `TEXT`"},
			&ucli.StringFlag{Name: "command", Usage: "only jobs whose command contains `TEXT`"},
			&ucli.IntFlag{Name: "limit", Usage: fmt.Sprintf("show the newest `N` jobs (default %d on a terminal, %d otherwise)", listTerminalRows, listPipedRows)},
			&ucli.BoolFlag{Name: "all", Usage: "show every job the filters select"},
			&ucli.StringFlag{Name: "cursor", Usage: "continue after the page whose next_cursor is `CURSOR`"},
			&ucli.BoolFlag{Name: "all-scopes", Usage: "list every scope's jobs"},
			&ucli.Int64Flag{Name: "tail", Usage: "show the last `N` lines of each job's output"},
			&ucli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw the table whenever the database changes, until interrupted"},
		},
		Action: r.list,
	}
}

// parseStatuses reads --status values.
func parseStatuses(verb string, vals []string) ([]jobs.Status, error) {
	var out []jobs.Status
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			switch s {
			case "":
				continue
			case "active":
				out = append(out, jobs.StatusQueued, jobs.StatusStarting, jobs.StatusRunning)
				continue
			case "finished":
				out = append(out, jobs.StatusDone, jobs.StatusFailed, jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost)
				continue
			}
			ok := false
			for _, st := range allStatuses {
				if string(st) == s {
					ok = true
				}
			}
			if !ok {
				return nil, usagef(verb, "unknown status %s: want starting, running, done, failed, killed, timed_out, lost, active or finished", quoted(s))
			}
			out = append(out, jobs.Status(s))
		}
	}
	return out, nil
}

// Default page sizes of list: a screen on a terminal, more when the
// output goes to a program or a file.
const (
	listTerminalRows = 20
	listPipedRows    = jobs.DefaultListLimit
)

// listPage is the JSON of list: a page of jobs.
type listPage struct {
	Jobs        []listItem `json:"jobs"`
	More        int        `json:"more"`
	MoreAtLeast bool       `json:"more_at_least,omitempty"`
	Next        string     `json:"next_cursor,omitempty"`
}

// listItem is one job in the JSON of list; Tail is set with --tail.
type listItem struct {
	jobs.Job
	Tail *string `json:"tail,omitempty"`
}

// MarshalJSON adds "tail" to the job's own JSON (which Job.MarshalJSON
// would otherwise write alone, being promoted).
func (it listItem) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(it.Job)
	if err != nil || it.Tail == nil {
		return b, err
	}
	tail, err := json.Marshal(*it.Tail)
	if err != nil {
		return nil, err
	}
	return append(append(append(b[:len(b)-1:len(b)-1], `,"tail":`...), tail...), '}'), nil
}

func (r *runner) list(cc *ucli.Context) error {
	const verb = "list"
	if cc.Args().Present() {
		return usagef(verb, "list takes no arguments (did you mean 'jobs status %s'?)", cc.Args().First())
	}
	statuses, err := parseStatuses(verb, cc.StringSlice("status"))
	if err != nil {
		return err
	}
	tail := cc.Int64("tail")
	if err := nonNegative(verb, "tail", tail); err != nil {
		return err
	}
	f := jobs.Filter{Statuses: statuses, AllScopes: cc.Bool("all-scopes"), Cursor: cc.String("cursor"),
		Name: cc.String("name"), Label: cc.String("label"), Command: cc.String("command")}
	if cc.IsSet("since") {
		d, err := parseDuration(verb, "since", cc.String("since"))
		if err != nil {
			return err
		}
		f.Since = time.Now().Add(-d)
	}
	switch limit := cc.Int("limit"); {
	case cc.IsSet("limit") && cc.Bool("all"):
		return usagef(verb, "--limit and --all exclude each other")
	case cc.IsSet("limit") && limit <= 0:
		return usagef(verb, "--limit must be at least 1, got %d", limit)
	case cc.IsSet("limit"):
		f.Limit = limit
	case cc.Bool("all"):
		f.Limit = 0
	case isTerminal(r.stdoutFile()) && !jsonOut(cc):
		f.Limit = listTerminalRows
	default:
		f.Limit = listPipedRows
	}
	if cc.Bool("watch") {
		return r.watchList(cc, f, tail)
	}
	var items []listItem
	var page jobs.Page
	if multi(cc) {
		items, err = r.listMulti(cc, f, tail)
	} else {
		items, page, err = r.listOne(cc, f, tail)
	}
	if err != nil {
		return err
	}
	if jsonOut(cc) {
		return r.printJSON(listPage{Jobs: items, More: page.More, MoreAtLeast: page.MoreAtLeast, Next: page.Next})
	}
	if len(items) == 0 {
		fmt.Fprintln(r.stdout, "no jobs")
		return nil
	}
	fmt.Fprint(r.stdout, formatList(items, time.Now(), r.paint(), f.AllScopes, multi(cc), commandWidth(r.stdoutFile())))
	if page.More > 0 {
		n := formatCount(page.More)
		if page.MoreAtLeast {
			n = "over " + n
		}
		fmt.Fprintln(r.stdout, r.paint().dim(fmt.Sprintf("… and %s more (jobs list --limit N / --all)", n)))
	}
	return nil
}

// listOne is list over the one database, a page at a time (all of it
// when f.Limit is 0).
func (r *runner) listOne(cc *ucli.Context, f jobs.Filter, tail int64) ([]listItem, jobs.Page, error) {
	c, err := r.client(cc)
	if err != nil {
		return nil, jobs.Page{}, err
	}
	ctx := cc.Context
	var page jobs.Page
	if f.Limit == 0 {
		page.Jobs, err = c.List(ctx, f)
	} else {
		page, err = c.ListPage(ctx, f)
	}
	if err != nil {
		return nil, jobs.Page{}, err
	}
	items := make([]listItem, len(page.Jobs))
	for i, j := range page.Jobs {
		items[i].Job = j
		if tail > 0 {
			text := ""
			if j.Scope == c.Scope() {
				out, err := c.Log(ctx, j.ID, jobs.Range{TailLines: tail, Clean: true})
				if err != nil {
					return nil, jobs.Page{}, err
				}
				text = out.Text
			}
			items[i].Tail = &text
		}
	}
	return items, page, nil
}

// formatCount writes n with thousands separators: 200,000.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// commandWidth is how much of the command list shows: cut on a terminal,
// whole when piped (0).
func commandWidth(f *os.File) int {
	if isTerminal(f) {
		return 60
	}
	return 0
}

// formatList renders the job table and, with tails, each job's last lines
// indented under it. hosts adds the HOST column (several databases).
func formatList(items []listItem, now time.Time, pt painter, scopes, hosts bool, cmdWidth int) string {
	var t table
	head := []string{"ID", "NAME", "STATUS", "PID", "RUNTIME", "OUTPUT", "LAST OUTPUT", "COMMAND"}
	if scopes {
		head = append([]string{"SCOPE"}, head...)
	}
	if hosts {
		head = append([]string{"HOST"}, head...)
	}
	for i := range head {
		head[i] = pt.dim(head[i])
	}
	t.add(head...)
	var out strings.Builder
	for _, it := range items {
		j := it.Job
		pid := "-"
		if j.PID > 0 && !j.Status.Terminal() && !j.MainExited {
			pid = fmt.Sprint(j.PID)
		}
		last := "-"
		if j.LastOutputAt != nil {
			last = formatAge(now, *j.LastOutputAt)
		}
		row := []string{
			j.ID, jobTitle(j, 24), pt.status(j.Status, statusText(j)), pid,
			formatDuration(j.Runtime), parse.FormatSize(j.OutputBytes), last, truncate(commandText(j), cmdWidth),
		}
		if scopes {
			row = append([]string{shown(j.Scope)}, row...)
		}
		if hosts {
			row = append([]string{shown(j.Host)}, row...)
		}
		t.add(row...)
	}
	lines := strings.SplitAfter(t.render(), "\n")
	out.WriteString(lines[0])
	for i, it := range items {
		out.WriteString(lines[i+1])
		if it.Tail != nil && *it.Tail != "" {
			for _, l := range strings.Split(strings.TrimRight(*it.Tail, "\n"), "\n") {
				out.WriteString("    " + pt.dim(l) + "\n")
			}
		}
	}
	return out.String()
}
