package jobs

import (
	"context"
	"time"

	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/textclean"
)

// Changes tells a long-lived reader (a web view) when the database may have
// changed, so it asks again only then or after its own period. It watches
// the database's directory from the start: a watcher's first second of
// short sleeps would cost the reader a query each.
type Changes struct {
	w *watcher
}

// Changes returns a watcher of the client's database. Close it when done.
func (c *Client) Changes() *Changes {
	w := newWatcher(c.path)
	w.watchNow()
	return &Changes{w: w}
}

// Wait returns when the database may have changed, after at most d, or
// with ctx's error.
func (ch *Changes) Wait(ctx context.Context, d time.Duration) error { return ch.w.Wait(ctx, d) }

// Looked tells ch whether the caller's last look found anything new for
// it. While its looks find nothing (another job's output is what wakes
// it), writes wake it less often, down to about once a second; the next
// look after a quiet gap still sees every write.
func (ch *Changes) Looked(found bool) { ch.w.Looked(found) }

// Close releases the watch.
func (ch *Changes) Close() { ch.w.Close() }

// Day counts what happened on one UTC day, from the scope_daily view
// (events, so jobs deleted since still count).
type Day struct {
	Day      string `json:"day"` // YYYY-MM-DD
	Created  int64  `json:"created"`
	Done     int64  `json:"done"`
	Failed   int64  `json:"failed"`
	Killed   int64  `json:"killed"`
	TimedOut int64  `json:"timed_out"`
	Lost     int64  `json:"lost"`
}

// Daily returns the jobs created and ended per day, by outcome, for the
// last days days (today included), oldest first; allScopes adds up every
// scope. Days without events are left out.
func (c *Client) Daily(ctx context.Context, days int, allScopes bool) ([]Day, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	since := time.Now().UTC().AddDate(0, 0, -max(days-1, 0)).Format("2006-01-02")
	rows, err := c.db.ScopeDaily(ctx, c.opts.Scope, allScopes, since)
	if err != nil {
		return nil, err
	}
	var out []Day
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Day != r.Day {
			out = append(out, Day{Day: r.Day})
		}
		d := &out[len(out)-1]
		d.Created += r.Created
		d.Done += r.Done
		d.Failed += r.Failed
		d.Killed += r.Killed
		d.TimedOut += r.TimedOut
		d.Lost += r.Lost
	}
	return out, nil
}

// LastLines returns the last n lines of the output of j, a job that List
// returned, cleaned of escape codes. Unlike Log it does not count as an
// access to the job: a view that shows every job's last line at once is not
// a read of each (their TTLs would never run out while it is open).
func (c *Client) LastLines(ctx context.Context, j Job, n int64) (string, error) {
	if err := c.check(ctx); err != nil {
		return "", err
	}
	if j.OutputBytes == 0 || n <= 0 {
		return "", nil
	}
	p, err := logs.TailLines(ctx, c.db, j.ID, n, logs.Filter{})
	if err != nil {
		return "", err
	}
	return textclean.Clean(p.Data), nil
}
