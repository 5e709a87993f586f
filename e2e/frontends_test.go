package e2e

// The three front ends over one engine give the same answer: the same
// reads through `jobs --json`, the MCP server (default profile, over
// stdio) and package jobs, on the same jobs, compared field by field.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func init() {
	// out-err-lines N: N lines on stdout, every third one also a line on
	// stderr, then exits 0.
	helperModes["out-err-lines"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		for i := 1; i <= n; i++ {
			fmt.Printf("out line %d\n", i)
			if i%3 == 0 {
				fmt.Fprintf(os.Stderr, "err line %d\n", i)
			}
		}
		return nil
	}
	// lines-then-idle N: N lines on stdout, then waits to be killed.
	helperModes["lines-then-idle"] = func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		for i := 1; i <= n; i++ {
			fmt.Printf("tick %d\n", i)
		}
		idle()
		return nil
	}
}

// mcpNames maps the default MCP profile's result fields to the CLI's JSON
// fields that mean the same (docs/json.md), as path prefixes: a flattened
// MCP key is renamed by its longest matching prefix. "{id}" stands for the
// job's id. Only what the MCP profile names differently is listed.
var mcpNames = map[string]map[string]string{
	// process poll and wait (one job): the job's fields flat beside the
	// output (OpenClaw's string) and output_info; the CLI nests the job
	// in "job" (poll) or "jobs" (wait), the offsets in "output".
	"poll": {
		"sessionId":         "job.id",
		"status":            "job.status",
		"exitCode":          "job.exit_code",
		"signal":            "job.signal",
		"reason":            "job.reason",
		"runtime_ms":        "job.runtime_ms",
		"waiting_for_input": "job.waiting_for_input",
		"stopped":           "job.stopped",
		"descendants":       "job.descendants",
		// The documents' output is the last 500 characters on every poll
		// (no counterpart: the CLI's tail starts at a line); what is new
		// since the last poll is new_output, the CLI's poll --new.
		"output":          "-",
		"output_info":     "-",
		"new_output":      "output.output",
		"new_output_info": "output",
	},
	"wait": {
		"sessionId":         "jobs.{id}.id",
		"status":            "jobs.{id}.status",
		"exitCode":          "jobs.{id}.exit_code",
		"signal":            "jobs.{id}.signal",
		"reason":            "jobs.{id}.reason",
		"runtime_ms":        "jobs.{id}.runtime_ms",
		"waiting_for_input": "jobs.{id}.waiting_for_input",
		"stopped":           "jobs.{id}.stopped",
		"descendants":       "jobs.{id}.descendants",
		"wait_reason":       "reason",
		"output":            "-", // the CLI's wait returns no output
		"output_info":       "-",
	},
	// process log (unit bytes or lines): the page as a string and its
	// offsets in output_info; the CLI prints the output object.
	"log": {
		"sessionId":   "id",
		"output_info": "",
		// With unit=lines it is the next line's offset (lines from 0, as
		// OpenClaw's log offset), with unit=bytes a byte offset as the
		// CLI's: checked apart, in the test.
		"output_info.next_offset": "-",
		"status":                  "-", // the CLI's log has no status
		"unit":                    "-",
	},
	"status": {
		"session.sessionId": "job.id",
		"session.exitCode":  "job.exit_code",
		"session":           "job",
		"history":           "events",
	},
	// process list: OpenClaw's SessionMeta.
	"list": {
		"sessions.{id}.sessionId":      "jobs.{id}.id",
		"sessions.{id}.exitCode":       "jobs.{id}.exit_code",
		"sessions.{id}.outputLength":   "jobs.{id}.output_bytes",
		"sessions.{id}.createdAt":      "-", // milliseconds since the epoch: checked apart
		"sessions.{id}.lastAccessedAt": "-",
		"sessions":                     "jobs",
	},
}

// mcpCut are the fields the MCP profile documents as cut to a length
// (docs/json.md: list's command, to 60 characters): the MCP value, less
// its "…", must begin the CLI's.
var mcpCut = []string{"command"}

// mcpValues maps the MCP profile's words to the CLI's, by the field's last
// name, where it documents OpenClaw's: "error" is a failed job (or a lost
// one, which these jobs are not), as the status of a session (the
// history keeps jobs' own words).
var mcpValues = map[string]map[any]any{"status": {"error": "failed"}}

// unshared are fields that may differ between two reads of the same state
// and are not compared: how long a running job has run, when a job was
// last read, and the poll back-off hint (the CLI's and the MCP server's
// are two different hints, and package jobs keeps it out of its JSON).
var unshared = []string{"last_access_at", "retry_in_ms", "note"}

func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(join(prefix, k), e, out)
		}
	case []any:
		for i, e := range x {
			key := strconv.Itoa(i)
			if m, ok := e.(map[string]any); ok {
				for _, idk := range []string{"id", "sessionId"} {
					if id, ok := m[idk].(string); ok && (prefix == "jobs" || prefix == "sessions") {
						key = id
					}
				}
			}
			flatten(join(prefix, key), e, out)
		}
	default:
		out[prefix] = v
	}
}

func join(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "." + b
}

// asMap turns any JSON-shaped value into a flattened map.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	flatten("", x, out)
	return out
}

// renameMCP renames flattened MCP keys to the CLI's, for read kind and job
// id; a key mapped to "-" has no counterpart.
func renameMCP(kind, id string, m map[string]any) map[string]any {
	names := mcpNames[kind]
	out := map[string]any{}
	for k, v := range m {
		best := ""
		for from := range names {
			p := strings.ReplaceAll(from, "{id}", id)
			if (k == p || strings.HasPrefix(k, p+".")) && len(p) > len(best) {
				best = p
			}
		}
		nk := k
		if best != "" {
			var to string
			for from, t := range names {
				if strings.ReplaceAll(from, "{id}", id) == best {
					to = strings.ReplaceAll(t, "{id}", id)
				}
			}
			if to == "-" {
				continue
			}
			nk = strings.TrimPrefix(join(to, strings.TrimPrefix(strings.TrimPrefix(k, best), ".")), ".")
		}
		last := nk[strings.LastIndexByte(nk, '.')+1:]
		if w, ok := mcpValues[last][v]; ok {
			v = w
		}
		out[nk] = v
	}
	return out
}

// compare checks every field a and b share and returns how many; volatile
// leaves out the fields that change while a job runs.
func compare(t *testing.T, what, aName, bName string, a, b map[string]any, volatile bool) int {
	t.Helper()
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n := 0
	for _, k := range keys {
		bv, ok := b[k]
		if !ok || skipField(k, volatile) {
			continue
		}
		n++
		if fmt.Sprint(a[k]) != fmt.Sprint(bv) {
			t.Errorf("%s: %s: %s says %v, %s says %v", what, k, aName, short(a[k]), bName, short(bv))
		}
	}
	if os.Getenv("JOBS_E2E_SHOW_UNSHARED") != "" {
		for k := range b {
			if _, ok := a[k]; !ok {
				t.Logf("%s: only %s has %s", what, bName, k)
			}
		}
	}
	if n < 4 {
		// A mapping that matches nothing would compare nothing.
		t.Errorf("%s: %s and %s share only %d fields", what, aName, bName, n)
	}
	t.Logf("%s: %s and %s share %d fields", what, aName, bName, n)
	return n
}

func skipField(k string, volatile bool) bool {
	last := k[strings.LastIndexByte(k, '.')+1:]
	for _, u := range unshared {
		if last == u {
			return true
		}
	}
	return volatile && last == "runtime_ms"
}

func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// TestFrontEndsAgree runs the same reads through the CLI's --json, the MCP
// server and package jobs on a finished job with stdout and stderr lines,
// a failed one and a running one, and compares every field they share.
func TestFrontEndsAgree(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	done := w.start(append([]string{"--name", "build", "--label", "ci"}, helper("out-err-lines", "30")...)...)
	failed := w.start("--", "sh", "-c", "echo partial; echo 'bad input' >&2; exit 3")
	running := w.start(helper("lines-then-idle", "12")...)
	w.jobs("wait", done, failed)
	waitFor(t, 10*time.Second, "the running job's lines", func() bool {
		return strings.Contains(w.ok("log", running), "tick 12\n")
	})

	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{DB: w.dbPath(), Executable: jobsBin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := w.mcp()
	sqlDB := w.sqlDB()

	cli := func(args ...string) map[string]any {
		t.Helper()
		r := w.jobs(append([]string{"--json"}, args...)...)
		if r.stderr != "" || r.stdout == "" {
			t.Fatalf("%v", r)
		}
		var v any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		out := map[string]any{}
		flatten("", v, out)
		return out
	}
	mcp := func(args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "process", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("process %v: %v %v", args, err, res)
		}
		return asMap(t, res.StructuredContent)
	}
	lib := func(v any, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return asMap(t, v)
	}
	rewind := func(id string) {
		t.Helper()
		if _, err := sqlDB.ExecContext(ctx, `UPDATE jobs SET read_cursor = 0 WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
	}

	fields := 0
	for _, id := range []string{done, failed, running} {
		vol := id == running
		what := func(read string) string {
			return fmt.Sprintf("%s (%s)", read, map[string]string{done: "done", failed: "failed", running: "running"}[id])
		}

		// poll: the tail, cursor untouched (the MCP profile's poll
		// returns its new_output as the --new read, below).
		a := cli("poll", id)
		fields += compare(t, what("poll"), "cli", "jobs", a, lib(c.Poll(ctx, id, jobs.PollOptions{})), vol)

		// poll --new, each from the start of the output.
		rewind(id)
		a = cli("poll", "--new", id)
		rewind(id)
		b := lib(c.ReadNew(ctx, id, jobs.PollOptions{Newest: true}))
		rewind(id)
		m := renameMCP("poll", id, mcp(map[string]any{"action": "poll", "sessionId": id}))
		fields += compare(t, what("poll --new"), "cli", "jobs", a, b, vol)
		fields += compare(t, what("poll --new"), "cli", "mcp", a, m, vol)

		// log by bytes.
		a = cli("log", id, "--offset", "3", "--limit", "40", "--clean")
		b = lib(c.Log(ctx, id, jobs.Range{ByteRange: true, Offset: 3, Limit: 40, Clean: true}))
		raw := mcp(map[string]any{"action": "log", "sessionId": id, "unit": "bytes", "offset": 3, "limit": 40})
		m = renameMCP("log", id, raw)
		if next, ok := raw["output_info.next_offset"]; ok { // omitted at the end
			m["next_offset"] = next
		}
		fields += compare(t, what("log by bytes"), "cli", "jobs", a, b, vol)
		fields += compare(t, what("log by bytes"), "cli", "mcp", a, m, vol)

		// log by lines: line 2 on, 3 lines (the MCP offset counts lines
		// from 0, as OpenClaw's does).
		a = cli("log", id, "--from-line", "2", "--lines", "3", "--clean")
		b = lib(c.Log(ctx, id, jobs.Range{FromLine: 2, Lines: 3, Clean: true}))
		raw = mcp(map[string]any{"action": "log", "sessionId": id, "unit": "lines", "offset": 1, "limit": 3})
		m = renameMCP("log", id, raw)
		if next, ok := raw["output_info.next_offset"]; ok {
			fields++
			if want := a["first_line"].(float64) - 1 + a["lines"].(float64); next != want {
				t.Errorf("%s: the MCP next line offset is %v, want %v (first_line-1+lines of the CLI)", what("log by lines"), next, want)
			}
		}
		fields += compare(t, what("log by lines"), "cli", "jobs", a, b, vol)
		fields += compare(t, what("log by lines"), "cli", "mcp", a, m, vol)

		// status: the job and its history.
		a = cli("status", id)
		j, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := c.History(ctx, id)
		b = lib(map[string]any{"job": j, "events": evs}, err)
		m = renameMCP("status", id, mcp(map[string]any{"action": "status", "sessionId": id}))
		fields += compare(t, what("status"), "cli", "jobs", a, b, vol)
		fields += compare(t, what("status"), "cli", "mcp", a, m, vol)

		// wait: the finished ones at once, the running one until a short
		// timeout.
		args, o, margs := []string{"wait", id}, jobs.WaitOptions{}, map[string]any{"action": "wait", "sessionId": id}
		if id == running {
			args = append(args, "--timeout", "300ms")
			o.Timeout, margs["timeout"] = 300*time.Millisecond, 0.3
		}
		a = cli(args...)
		b = lib(c.Wait(ctx, []string{id}, o))
		m = renameMCP("wait", id, mcp(margs))
		fields += compare(t, what("wait"), "cli", "jobs", a, b, vol)
		fields += compare(t, what("wait"), "cli", "mcp", a, m, vol)
	}

	// list: all three jobs at once.
	a := cli("list")
	b := lib(c.ListPage(ctx, jobs.Filter{}))
	raw := mcp(map[string]any{"action": "list"})
	m := map[string]any{}
	for k, v := range renameMCP("list", "", raw) {
		if !strings.HasPrefix(k, "jobs.") { // each job's fields: below
			m[k] = v
		}
	}
	for _, id := range []string{done, failed, running} {
		for k, v := range renameMCP("list", id, raw) {
			if strings.HasPrefix(k, "jobs."+id+".") {
				m[k] = v
			}
		}
		// createdAt is milliseconds since the epoch, created_at a time.
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["jobs."+id+".created_at"]))
		if ms, ok := raw["sessions."+id+".createdAt"].(float64); err != nil || !ok || int64(ms) != at.UnixMilli() {
			t.Errorf("list: %s: mcp createdAt %v is not the CLI's created_at %v", id, raw["sessions."+id+".createdAt"], a["jobs."+id+".created_at"])
		}
		fields++
	}
	for k, v := range m {
		last := k[strings.LastIndexByte(k, '.')+1:]
		for _, f := range mcpCut {
			if s, ok := v.(string); ok && last == f && strings.HasSuffix(s, "…") {
				if c, ok := a[k].(string); ok && strings.HasPrefix(c, strings.TrimSuffix(s, "…")) {
					m[k] = c
				}
			}
		}
	}
	fields += compare(t, "list", "cli", "jobs", a, b, true)
	fields += compare(t, "list", "cli", "mcp", a, m, true)
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d shared fields compared across the CLI, MCP and package jobs", fields))
}
