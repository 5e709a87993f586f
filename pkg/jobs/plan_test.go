package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/internal/testlong"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// fullScan matches a plan step that reads a whole table or a whole index
// of jobs, chunks or events (also under the aliases the views use).
var fullScan = regexp.MustCompile(`\bSCAN (jobs|chunks|events|j|c|e)\b`)

// A walk of an index in its order that the statement's LIMIT stops (no
// sort of the rows first) reads a page's rows, not the history: the newest
// page of every scope's jobs is one.
var (
	indexWalk = regexp.MustCompile(`\bSCAN (jobs|j) USING (COVERING )?INDEX \w+$`)
	limited   = regexp.MustCompile(`(?i)\bLIMIT \?\s*\)?\s*$`)
)

// Statements about one job must find its rows by job_id: a search of
// events or chunks by anything else (the scope's events index, say) walks
// rows of every other job too.
var (
	oneJob     = regexp.MustCompile(`\bjob_id = (\?|jobs\.id)`)
	searchRows = regexp.MustCompile(`\bSEARCH (events|chunks)\b`)
)

// TestQueryPlansSeekHistory runs every everyday verb of the library (which
// the CLI, its supervisor and the MCP server are built on) against a
// database with a long history, collects the text of every statement they
// ran, and asks SQLite how it plans each one: none may scan jobs, chunks
// or events, so that no verb costs more as history grows. The queries come
// from the running code, not from a list kept beside it. The history is
// 1,000 jobs, 3,000 with the long sizes (JOBS_PLAN_JOBS sets it). Not
// parallel: the trace is the process's.
func TestQueryPlansSeekHistory(t *testing.T) {
	n := testlong.Pick(1000, 3000)
	if v, err := strconv.Atoi(os.Getenv("JOBS_PLAN_JOBS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dbtest.Fill(ctx, d, dbtest.History{Scope: "plan", Jobs: n, ChunkBytes: 100, End: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	d.Close()

	var mu sync.Mutex
	seen := map[string]bool{}
	stop := db.TraceQueries(func(q string) {
		mu.Lock()
		seen[q] = true
		mu.Unlock()
	})
	defer stop()

	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	j, err := c.Start(ctx, jobs.Spec{Command: "seq 1 2000", Name: "counter", Label: "plan test"})
	must("start", err)
	_, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{})
	must("wait", err)
	_, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{})
	must("wait on a finished job", err)
	_, err = c.Get(ctx, j.ID)
	must("get", err)
	_, err = c.Get(ctx, j.ID[:6])
	must("get by prefix", err)
	_, err = c.Get(ctx, "counter")
	must("get by name", err)
	_, err = c.Poll(ctx, j.ID, jobs.PollOptions{})
	must("poll", err)
	_, err = c.ReadNew(ctx, j.ID, jobs.PollOptions{})
	must("poll --new", err)
	_, err = c.Log(ctx, j.ID, jobs.Range{Offset: 100, Limit: 1000})
	must("log page", err)
	_, err = c.Log(ctx, j.ID, jobs.Range{FromLine: 10, Lines: 20})
	must("log lines", err)
	_, err = c.Log(ctx, j.ID, jobs.Range{TailLines: 5})
	must("log tail", err)
	_, err = c.History(ctx, j.ID)
	must("status history", err)
	for ev, err := range c.Events(ctx, jobs.EventOptions{Since: 5}) {
		must("events", err)
		_ = ev
		break
	}
	for _, o := range []jobs.EventOptions{{Since: 1 << 40}, {Since: 1 << 40, AllScopes: true}, {JobID: j.ID}} {
		for _, err := range c.Events(ctx, o) {
			must("events", err)
		}
	}
	_, err = c.EventCursor(ctx, time.Now())
	must("event cursor (an MCP server's start)", err)
	page, err := c.ListPage(ctx, jobs.Filter{})
	must("list", err)
	_, err = c.ListPage(ctx, jobs.Filter{Cursor: page.Next, Limit: 20})
	must("list next page", err)
	for _, f := range []jobs.Filter{
		{Statuses: []jobs.Status{jobs.StatusRunning, jobs.StatusStarting}},
		{Statuses: []jobs.Status{jobs.StatusDone}},
		{Since: time.Now().Add(-time.Minute)},
		{Name: "count"}, {Label: "plan"}, {Command: "seq"},
	} {
		_, err = c.ListPage(ctx, f)
		must("list with a filter", err)
		f.AllScopes = true
		_, err = c.ListPage(ctx, f)
		must("list every scope with a filter", err)
	}
	page, err = c.ListPage(ctx, jobs.Filter{AllScopes: true, Limit: 20})
	must("list every scope", err)
	_, err = c.ListPage(ctx, jobs.Filter{AllScopes: true, Cursor: page.Next})
	must("list every scope, next page", err)
	_, err = c.List(ctx, jobs.Filter{Limit: 100})
	must("list as the MCP server does", err)
	_, err = c.GC(ctx)
	must("gc", err)
	k, err := c.Start(ctx, jobs.Spec{Command: "sleep 300"})
	must("start", err)
	_, err = c.Poll(ctx, k.ID, jobs.PollOptions{})
	must("poll a running job", err)
	_, err = c.Kill(ctx, k.ID, time.Second)
	must("kill", err)
	must("clear", c.Clear(ctx, j.ID))
	_, err = c.Remove(ctx, j.ID)
	must("remove", err)
	stop()

	d, err = db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var queries []string
	for q := range seen {
		queries = append(queries, q)
	}
	sort.Strings(queries)
	checked := 0
	for _, q := range queries {
		if !explainable(q) {
			continue
		}
		plan, err := explain(ctx, d, q)
		if testing.Verbose() {
			t.Logf("%s\n  -> %s", strings.Join(strings.Fields(q), " "), strings.Join(plan, "; "))
		}
		if err != nil {
			t.Errorf("explain: %v\n%s", err, q)
			continue
		}
		checked++
		for _, step := range plan {
			if fullScan.MatchString(step) && !(indexWalk.MatchString(step) && limited.MatchString(q) && !sorts(plan)) {
				t.Errorf("full scan %q in the plan of\n%s\nplan: %s", step, q, strings.Join(plan, "; "))
			}
			if oneJob.MatchString(q) && searchRows.MatchString(step) && !strings.Contains(step, "job_id=") {
				t.Errorf("search not by job in the plan of\n%s\nplan: %s", q, strings.Join(plan, "; "))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d statements checked: the trace missed the verbs", checked)
	}
	t.Logf("%d statements planned as seeks against %d jobs, %d events", checked, n+2, 3*n+6)
}

// sorts: the plan sorts rows before its LIMIT applies, so it reads all
// the rows it sorts.
func sorts(plan []string) bool {
	for _, step := range plan {
		if strings.Contains(step, "TEMP B-TREE") {
			return true
		}
	}
	return false
}

// explainable: statements that read or change rows; PRAGMAs, transaction
// control and the schema's own statements have no plan to check.
func explainable(q string) bool {
	w := strings.ToUpper(strings.Fields(strings.TrimSpace(q) + " x")[0])
	switch w {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH":
		return !strings.Contains(q, "goose_db_version") && !strings.Contains(q, "sqlite_master")
	}
	return false
}

// param matches a parameter: ? or ?NNN.
var param = regexp.MustCompile(`\?(\d*)`)

// explain returns the detail column of EXPLAIN QUERY PLAN for q with NULL
// for every parameter: SQLite plans without looking at their values.
func explain(ctx context.Context, d *db.DB, q string) ([]string, error) {
	n := 0
	for _, m := range param.FindAllStringSubmatch(q, -1) {
		if m[1] == "" {
			n++
		} else if k, _ := strconv.Atoi(m[1]); k > n {
			n = k
		}
	}
	rows, err := d.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, make([]any, n)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}
