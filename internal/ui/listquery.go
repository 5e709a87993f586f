package ui

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// listQuery is the list's filter and order, from the page's query
// parameters (so a filtered list is a link, and works without script):
// status (a status, or "paused"), q (text in the name, command or label),
// sort (newest, oldest, name, status).
type listQuery struct {
	Status string
	Text   string
	Sort   string
}

// paused is how the view names a running job whose processes are stopped
// (jobs pause, SIGSTOP): its status stays running.
const paused = "paused"

// statusChoices are the statuses the list's filter offers.
var statusChoices = []string{
	string(jobs.StatusRunning), paused, string(jobs.StatusStarting), string(jobs.StatusDone),
	string(jobs.StatusFailed), string(jobs.StatusKilled), string(jobs.StatusTimedOut), string(jobs.StatusLost),
}

// sortChoices are the orders the list offers: value and label.
var sortChoices = [][2]string{
	{"newest", "newest first"}, {"oldest", "oldest first"}, {"name", "name"}, {"status", "status"},
}

func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{Status: v.Get("status"), Text: strings.TrimSpace(v.Get("q")), Sort: v.Get("sort")}
	if q.Status != "" && !slices.Contains(statusChoices, q.Status) {
		return q, fmt.Errorf("%w: unknown status %q (use one of %s)", jobs.ErrInvalid, clip(q.Status), strings.Join(statusChoices, ", "))
	}
	switch q.Sort {
	case "", "newest", "oldest", "name", "status":
	default:
		return q, fmt.Errorf("%w: unknown order %q (use newest, oldest, name or status)", jobs.ErrInvalid, clip(q.Sort))
	}
	return q, nil
}

// encode is the query as URL parameters, for the list's event stream.
func (q listQuery) encode() string {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Text != "" {
		v.Set("q", q.Text)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	return v.Encode()
}

// list reads the jobs the query keeps, in its order: at most listLimit of
// the newest that match. The status and text are asked of the database,
// so a filter finds old jobs too.
func (q listQuery) list(ctx context.Context, c *jobs.Client, all bool) ([]jobs.Job, error) {
	f := jobs.Filter{AllScopes: all, Limit: listLimit}
	switch q.Status {
	case "":
	case paused:
		f.Statuses = []jobs.Status{jobs.StatusRunning}
	default:
		f.Statuses = []jobs.Status{jobs.Status(q.Status)}
	}
	var js []jobs.Job
	if q.Text == "" {
		var err error
		if js, err = c.List(ctx, f); err != nil {
			return nil, err
		}
	} else {
		// The name, the command or the label: one read each, merged.
		seen := map[string]bool{}
		for _, by := range []func(*jobs.Filter){
			func(f *jobs.Filter) { f.Name = q.Text },
			func(f *jobs.Filter) { f.Command = q.Text },
			func(f *jobs.Filter) { f.Label = q.Text },
		} {
			g := f
			by(&g)
			part, err := c.List(ctx, g)
			if err != nil {
				return nil, err
			}
			for _, j := range part {
				if !seen[j.ID] {
					seen[j.ID] = true
					js = append(js, j)
				}
			}
		}
		sortJobs(js, "newest")
		if len(js) > listLimit {
			js = js[:listLimit]
		}
	}
	if q.Status == paused || q.Status == string(jobs.StatusRunning) {
		// Paused is running with its processes stopped: a fact of the
		// processes, not of the row.
		keep := js[:0]
		for _, j := range js {
			if j.Stopped == (q.Status == paused) {
				keep = append(keep, j)
			}
		}
		js = keep
	}
	sortJobs(js, q.Sort)
	return js, nil
}

// sortJobs orders the jobs as the list shows them.
func sortJobs(js []jobs.Job, by string) {
	newest := func(a, b jobs.Job) bool {
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.ID > b.ID
	}
	less := newest
	switch by {
	case "oldest":
		less = func(a, b jobs.Job) bool { return newest(b, a) }
	case "name":
		less = func(a, b jobs.Job) bool {
			x, y := strings.ToLower(title(a)), strings.ToLower(title(b))
			if x != y {
				return x < y
			}
			return newest(a, b)
		}
	case "status":
		less = func(a, b jobs.Job) bool {
			x, y := state(a), state(b)
			if x != y {
				return x < y
			}
			return newest(a, b)
		}
	}
	sort.SliceStable(js, func(i, k int) bool { return less(js[i], js[k]) })
}

// state is the status a person is shown: paused for a running job whose
// processes are stopped, else the status.
func state(j jobs.Job) string {
	if j.Status == jobs.StatusRunning && j.Stopped {
		return paused
	}
	return string(j.Status)
}
