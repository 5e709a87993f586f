package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/agentjobs/jobs/internal/testlong"
)

// Size knobs of the history tests: JOBS_E2E_HISTORY_JOBS (finished jobs
// behind the listing tests, default 2,000) and JOBS_E2E_EXPIRE_JOBS (jobs
// of 10 KiB created and expired for the size test, default 3,000; the
// issue's figure is 100,000).
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fill adds n finished jobs to the world's database, in scope "default".
func (w *world) fill(n int, h dbtest.History) {
	w.t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, w.dbPath())
	if err != nil {
		w.t.Fatal(err)
	}
	defer d.Close()
	if h.Scope == "" {
		h.Scope = "default"
	}
	h.Jobs = n
	if err := dbtest.Fill(ctx, d, h); err != nil {
		w.t.Fatal(err)
	}
}

// listPage is the JSON of `jobs list`.
type listPage struct {
	Jobs []struct {
		ID      string `json:"id"`
		Command string `json:"command"`
		Name    string `json:"name"`
		Status  string `json:"status"`
	} `json:"jobs"`
	More        int    `json:"more"`
	MoreAtLeast bool   `json:"more_at_least"`
	Next        string `json:"next_cursor"`
}

func (w *world) listJSON(args ...string) listPage {
	w.t.Helper()
	var p listPage
	out := w.ok(append([]string{"--json", "list"}, args...)...)
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		w.t.Fatalf("list --json: %v\n%s", err, out)
	}
	return p
}

// TestHistoryListBounded: a scope that kept thousands of jobs lists the
// newest 50 (piped) and one line saying how many more; --limit, --all and
// the filters select what they say; --json pages with a cursor that visits
// every job once.
func TestHistoryListBounded(t *testing.T) {
	t.Parallel()
	n := envCount("JOBS_E2E_HISTORY_JOBS", testlong.Pick(1100, 2000))
	w := newWorld(t)
	w.ok("list") // creates the database
	w.fill(n, dbtest.History{ChunkBytes: 10, End: time.Now().Add(-time.Hour)})
	named := w.start("--name", "web_1", "--label", "100% done", "--", "echo", "a_b%c")
	w.ok("wait", named)
	total := n + 1

	out := w.ok("list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if got, want := len(lines), 1+50+1; got != want {
		t.Fatalf("default list printed %d lines, want %d (header, 50 rows, more):\n%s", got, want, out)
	}
	more := fmt.Sprintf("… and %s more (jobs list --limit N / --all)", thousands(total-50))
	if total-50 > 1000 {
		more = "… and over 1,000 more (jobs list --limit N / --all)"
	}
	if last := lines[len(lines)-1]; last != more {
		t.Errorf("last line %q, want %q", last, more)
	}
	if !strings.Contains(lines[1], named) {
		t.Errorf("newest job %s not first:\n%s", named, lines[1])
	}
	if got := strings.Count(w.ok("list", "--limit", "7"), "\n"); got != 1+7+1 {
		t.Errorf("--limit 7 printed %d lines", got)
	}
	if got := strings.Count(w.ok("list", "--all"), "\n"); got != 1+total {
		t.Errorf("--all printed %d lines, want %d", got, 1+total)
	}

	// Filters: LIKE's wildcards in the text match only themselves.
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--command", "a_b%c"}, 1},
		{[]string{"--command", "a%c"}, 0},
		{[]string{"--command", "test-1"}, -1}, // the generator's commands
		{[]string{"--name", "web_"}, 1},
		{[]string{"--name", "web%"}, 0},
		{[]string{"--label", "100%"}, 1},
		{[]string{"--label", "10_%"}, 0},
		{[]string{"--status", "done", "--since", "10m"}, 1},
		{[]string{"--since", "2h", "--all"}, total},
		{[]string{"--status", "running"}, 0},
	} {
		p := w.listJSON(append(c.args, "--all")...)
		if c.want >= 0 && len(p.Jobs) != c.want {
			t.Errorf("list %v: %d jobs, want %d", c.args, len(p.Jobs), c.want)
		}
		if c.want < 0 && (len(p.Jobs) == 0 || len(p.Jobs) == total) {
			t.Errorf("list %v: %d jobs", c.args, len(p.Jobs))
		}
	}

	// Paging with the cursor visits every job once, newest first.
	seen := map[string]bool{}
	pages, cursor := 0, ""
	for {
		args := []string{"--limit", "300"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		p := w.listJSON(args...)
		pages++
		for _, j := range p.Jobs {
			if seen[j.ID] {
				t.Fatalf("job %s listed twice", j.ID)
			}
			seen[j.ID] = true
		}
		if want := min(total-len(seen), 1000); p.More != want || (p.Next == "") != (want == 0) {
			t.Fatalf("page %d: more %d (at least %v), next %q; want more %d", pages, p.More, p.MoreAtLeast, p.Next, want)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(seen) != total {
		t.Errorf("paging saw %d jobs of %d", len(seen), total)
	}

	// Bad input: one line, exit 2, nothing listed.
	for _, args := range [][]string{
		{"list", "--limit", "0"}, {"list", "--limit", "3", "--all"}, {"list", "--since", "yesterday"},
		{"list", "--cursor", strings.Repeat("x", 5000)},
	} {
		r := w.jobs(args...)
		if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ") || r.stdout != "" || len(r.stderr) > 300 {
			t.Errorf("bad input: %v", r)
		}
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("default list of %s jobs: 50 rows and 1 line of more; %d cursor pages visit each job once", thousands(total), pages))
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestHistoryStaysSmall: a database that keeps creating and expiring jobs
// reuses and returns its free pages. Ten rounds of jobs with 10 KiB of
// output each are written and expired by `jobs gc`. The file (with its
// WAL) after the last round's jobs were written is at most 1.5 times its
// size after the first round's: the space of expired jobs is reused, and
// only their events (kept for their own retention) add up. After the last
// expiry the space is given back: the file is less than half that size.
func TestHistoryStaysSmall(t *testing.T) {
	t.Parallel()
	total := envCount("JOBS_E2E_EXPIRE_JOBS", testlong.Pick(1000, 3000))
	per := max(1, total/10)
	w := newWorld(t)
	w.ok("list")
	size := func() int64 { return fileSize(w.dbPath()) + fileSize(w.dbPath()+"-wal") }
	var first, last int64
	for round := 0; round < 10; round++ {
		w.fill(per, dbtest.History{ChunkBytes: 10 << 10, TTL: time.Millisecond, End: time.Now().Add(-time.Minute)})
		last = size()
		if round == 0 {
			first = last
		}
		w.ok("gc")
	}
	after := size()
	var av, free int
	d := w.sqlDB()
	if err := d.QueryRow(`PRAGMA auto_vacuum`).Scan(&av); err != nil {
		t.Fatal(err)
	}
	if err := d.QueryRow(`PRAGMA freelist_count`).Scan(&free); err != nil {
		t.Fatal(err)
	}
	if av != 2 {
		t.Errorf("auto_vacuum = %d, want 2 (incremental) on a new database", av)
	}
	ratio := float64(last) / float64(first)
	if ratio > 1.5 {
		t.Errorf("size with the last %d jobs %d bytes, with the first %d: %d bytes (%.2f×, want ≤ 1.5)", per, last, per, first, ratio)
	}
	if free > db.FreeSlack || after >= last {
		t.Errorf("after the last expiry %d free pages (keep %d) and %d bytes, before it %d: free pages not given back", free, db.FreeSlack, after, last)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%s jobs × 10 KiB created and expired: %.1f MiB with the last tenth vs %.1f MiB with the first (%.2f×); %.1f MiB after the last expiry, %d free pages left",
		thousands(per*10), mibF(last), mibF(first), ratio, mibF(after), free))
}

func mibF(n int64) float64 { return float64(n) / (1 << 20) }

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// TestHistoryVacuumOldDatabase: a database created without auto-vacuum
// (by an older version) gets it from `jobs gc --vacuum`, which also gives
// the space of deleted jobs back, and keeps every job.
func TestHistoryVacuumOldDatabase(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := os.MkdirAll(w.state+"/jobs", 0o700); err != nil {
		t.Fatal(err)
	}
	// What an older version created: WAL, no auto-vacuum.
	old, err := sql.Open("sqlite", "file:"+w.dbPath()+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`CREATE TABLE t (x); DROP TABLE t`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := os.Chmod(w.dbPath(), 0o600); err != nil {
		t.Fatal(err)
	}
	w.ok("list")
	w.fill(300, dbtest.History{ChunkBytes: 10 << 10, TTL: time.Millisecond, End: time.Now().Add(-time.Minute)})
	w.fill(50, dbtest.History{ChunkBytes: 10})
	w.ok("gc")
	var av int
	if err := w.sqlDB().QueryRow(`PRAGMA auto_vacuum`).Scan(&av); err != nil || av != 0 {
		t.Fatalf("auto_vacuum before = %d, %v; want 0 for the old database", av, err)
	}
	before := fileSize(w.dbPath()) + fileSize(w.dbPath()+"-wal")
	out := w.ok("--json", "gc", "--vacuum")
	var res struct {
		Vacuum struct {
			Before int64 `json:"size_before"`
			After  int64 `json:"size_after"`
		} `json:"vacuum"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("gc --vacuum --json: %v\n%s", err, out)
	}
	if err := w.sqlDB().QueryRow(`PRAGMA auto_vacuum`).Scan(&av); err != nil || av != 2 {
		t.Errorf("auto_vacuum after gc --vacuum = %d, %v; want 2", av, err)
	}
	after := fileSize(w.dbPath()) + fileSize(w.dbPath()+"-wal")
	if after*2 > before || res.Vacuum.After*2 > res.Vacuum.Before {
		t.Errorf("gc --vacuum: %d bytes before, %d after (reported %+v)", before, after, res.Vacuum)
	}
	if p := w.listJSON("--all"); len(p.Jobs) != 50 {
		t.Errorf("%d jobs after vacuum, want 50", len(p.Jobs))
	}
	w.integrity()
	if !regexp.MustCompile(`vacuumed: .* before, .* after`).MatchString(w.ok("gc", "--vacuum")) {
		t.Error("gc --vacuum says nothing of the vacuum")
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("old database %.1f MiB → %.1f MiB, auto_vacuum 0 → 2", mibF(before), mibF(after)))
}
