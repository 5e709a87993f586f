package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/cli"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxArg is the longest single argument exec(2) passes on Linux
// (MAX_ARG_STRLEN, 32 pages, with its NUL); longer input reaches jobs only
// through MCP, which these tests use for the megabyte cases.
const maxArg = 128<<10 - 1

// mcp starts `jobs mcp` for the world's scope and returns a session to it.
// A world without a scope of its own is the CLI's scope "default", which
// `jobs mcp` (openclaw) does not take by itself: given no scope it serves
// its connection's own, as its documents isolate conversations. The tests
// compare it with the CLI, so it is named.
func (w *world) mcp() *sdk.ClientSession {
	w.t.Helper()
	cmd := exec.Command(jobsBin, "mcp")
	cmd.Env = w.mcpEnviron()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		w.t.Fatalf("connect to jobs mcp: %v", err)
	}
	w.t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpEnviron is the environment of a `jobs mcp` that serves the world's
// scope: a server given none serves one of its own per connection, and
// these tests compare it with the CLI's.
func (w *world) mcpEnviron() []string {
	env := w.environ()
	if w.scope == "" {
		env = append(env, "JOBS_SCOPE=default")
	}
	return env
}

// mcpCall calls a tool and returns its text and whether it is a tool error.
func mcpCall(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	// A hang guard, not a bound on speed: a megabyte of arguments on a
	// loaded machine took over a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

// controlRE matches what must never reach a terminal from human output or
// an error line: C0 controls other than the final newline, DEL, C1
// controls, the bidi overrides and isolates, and invalid UTF-8 (checked
// apart).
var controlRE = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069]")

// checkShown fails unless s is safe to print to a terminal: valid UTF-8
// and no control character but newlines.
func checkShown(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s is not valid UTF-8: %q", what, cut(s))
	}
	if loc := controlRE.FindStringIndex(s); loc != nil {
		t.Errorf("%s carries %q raw: %q", what, s[loc[0]:loc[1]], cut(s))
	}
}

// checkErrorLine fails unless r failed with exit code and one short, safe
// line on stderr and nothing on stdout.
func checkErrorLine(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Errorf("jobs %s: exit %d, want %d; stderr %q", cut(strings.Join(r.args, " ")), r.code, code, cut(r.stderr))
	}
	if !strings.HasPrefix(r.stderr, "jobs: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not one 'jobs: …' line: %q", cut(r.stderr))
	}
	if n := utf8.RuneCountInString(r.stderr); n > 400 {
		t.Errorf("error line is %d characters: %q", n, cut(r.stderr))
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stack trace: %q", cut(r.stderr))
	}
	checkShown(t, "error line", r.stderr)
	if r.stdout != "" {
		t.Errorf("stdout %q for a failed command", cut(r.stdout))
	}
}

// cut shortens s for a failure message.
func cut(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// Row C1 guards: every kind of id that names no job of the scope (junk, SQL,
// wildcards, huge, invalid UTF-8, a short prefix, another scope's job) gets
// the same one-line "not found", exit 1, with the id escaped and capped.
func TestC1InvalidIDsAnswerNotFound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.scope = "other"
	otherID := w.start("--name", "othername", "--", "true")
	w.scope = ""
	mine := w.start("--", "true")
	prefix1 := mine[:1]
	if prefix1 == otherID[:1] {
		prefix1 = "" // keep the class honest: skip it rather than test two at once
	}
	ids := []string{"-", "../x", "%", "_", "' OR 1=1--", "x\x1b]0;pwned\x07\x1b[2J\u202e", "\xff\xfe\xfd",
		strings.Repeat("a", maxArg), strings.Repeat("\x1b[2J", maxArg/4), otherID, otherID[:6], "othername"}
	if prefix1 != "" {
		ids = append(ids, prefix1)
	}
	want := ""
	for _, id := range ids {
		for _, verb := range [][]string{{"poll"}, {"status"}, {"log"}, {"kill"}, {"wait", "--timeout", "1s"}, {"rm"}, {"write", "--eof"}} {
			r := w.jobs(append(verb, id)...)
			checkErrorLine(t, r, 1)
			// The same words for every class, once the id is taken out.
			line := r.stderr
			// A reference too short to be an id prefix is told so; that
			// depends on its form alone, never on what exists.
			const short = ": an id prefix needs at least 4 characters"
			if strings.Contains(line, short) {
				if len(id) >= 4 {
					t.Errorf("jobs %s %q: %q says the prefix is short", verb[0], cut(id), cut(r.stderr))
				}
				line = strings.Replace(line, short, "", 1)
			}
			if i, j := strings.Index(line, "job "), strings.Index(line, " not found"); i >= 0 && j > i {
				line = line[:i+4] + "X" + line[j:]
			} else {
				t.Errorf("jobs %s %q: %q does not say not found", verb[0], cut(id), cut(r.stderr))
				continue
			}
			if want == "" {
				want = line
			}
			if line != want {
				t.Errorf("jobs %s %q: %q, unlike %q", verb[0], cut(id), line, want)
			}
		}
	}
	// Malformed usage is exit 2.
	for _, args := range [][]string{{"poll", ""}, {"poll"}, {"poll", "a", "b"}, {"status", "--nosuch", "x"}} {
		checkErrorLine(t, w.jobs(args...), 2)
	}
	// A megabyte of id cannot pass exec; the command line parser takes it
	// in-process.
	for _, id := range []string{strings.Repeat("\x1b[2J", 1<<18), strings.Repeat("\xff", 1<<20)} {
		var out, errb strings.Builder
		code := cli.Run(context.Background(), []string{"jobs", "--db", w.dbPath(), "poll", id}, strings.NewReader(""), &out, &errb)
		checkErrorLine(t, result{args: []string{"poll", "<1 MiB>"}, stdout: out.String(), stderr: errb.String(), code: code}, 1)
	}
	// A megabyte of id through MCP: a short not-found, no echo of it all.
	cs := w.mcp()
	for _, id := range []string{strings.Repeat("\x1b]0;x\x07", 1<<20/6), "\xff" + strings.Repeat("a", 1<<20)} {
		text, isErr := mcpCall(t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		if !isErr || !strings.Contains(text, "not found") || len(text) > 400 || strings.ContainsRune(text, 0x1b) {
			t.Errorf("MCP poll of a 1 MiB id: error=%v, %d bytes: %q", isErr, len(text), cut(text))
		}
	}
	t.Logf("MATRIX-FIGURE %s", "12 id classes × 7 verbs: exit 1, one identical not-found line (≤ 400 chars, escaped); 4 malformed: exit 2; 1 MiB id (in-process CLI, MCP): one short line")
}

// Row C2 guards: names, labels and scopes with SQL, wildcards, escape
// sequences, newlines and bidi overrides are stored byte-exact, shown
// escaped by list and status, exact in --json; NUL, invalid UTF-8 and
// oversize values are refused with one line, exit 2.
func TestC2InjectionInNamesLabelsScopes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	values := []string{"'); DROP TABLE jobs;--", "%", "_", `\`, "t\x1b]0;x\x07", "c\x1b[2J", "new\nline", "bidi\u202eevil", "c1\u009b31m"}
	ids := map[string]string{}
	for _, v := range values {
		w.scope = v
		id := w.start("--name", v, "--label", v, "--", "sh", "-c", "true # "+v)
		ids[v] = id
		j, _ := w.status(v) // the name works as a reference
		if j.ID != id {
			t.Errorf("name %q resolves to %s, want %s", v, j.ID, id)
		}
		var s struct {
			Job struct {
				Name, Label, Scope string
				Argv               []string
			} `json:"job"`
		}
		raw := w.ok("--json", "status", id)
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatal(err)
		}
		if s.Job.Name != v || s.Job.Label != v || s.Job.Scope != v || len(s.Job.Argv) != 3 || s.Job.Argv[2] != "true # "+v {
			t.Errorf("stored %+v, want name, label and scope %q", s.Job, v)
		}
		if controlRE.MatchString(strings.ReplaceAll(raw, "\n", "")) {
			t.Errorf("--json status carries a raw escape: %q", raw)
		}
		if strings.ContainsRune(v, 0x1b) && !strings.Contains(raw, `\u001b`) {
			t.Errorf("--json status does not escape ESC as \\u001b: %q", raw)
		}
		for _, args := range [][]string{{"list"}, {"status", id}, {"poll", id}, {"list", "--all-scopes"}} {
			out := w.ok(args...)
			checkShown(t, "jobs "+args[0], out)
		}
		if out := w.ok("list"); strings.Count(out, "\n") != 2 {
			t.Errorf("list of one job is not two lines: %q", out)
		}
	}
	// No wildcard meaning: % and _ name only themselves.
	w.scope = "%"
	checkErrorLine(t, w.jobs("poll", "_"), 1)
	w.scope = "_"
	checkErrorLine(t, w.jobs("poll", "%"), 1)
	// Refused by rule: oversize, invalid UTF-8; exit 2, one line, nothing started.
	w.scope = "rules"
	for _, args := range [][]string{
		{"start", "--name", strings.Repeat("n", 257), "--", "true"},
		{"start", "--label", strings.Repeat("l", 4097), "--", "true"},
		{"start", "--label", strings.Repeat("\x1b", maxArg), "--", "true"},
		{"start", "--name", "bad\xffutf8", "--", "true"},
		{"--scope", strings.Repeat("s", 257), "start", "--", "true"},
		{"--scope", "\xfe", "list"},
	} {
		checkErrorLine(t, w.jobs(args...), 2)
	}
	if out := w.ok("list"); out != "no jobs\n" {
		t.Errorf("a refused start left a job: %q", out)
	}
	// NUL and a megabyte only come through MCP.
	cs := w.mcp()
	for _, args := range []map[string]any{
		{"command": "true", "name": "a\x00b"},
		{"command": "true", "label": "a\x00b"},
		{"command": "true", "name": strings.Repeat("\x1b[2J", 1<<18)},
		{"command": "true", "label": strings.Repeat("x", 1<<20)},
	} {
		text, isErr := mcpCall(t, cs, "execute_command", args)
		if !isErr || len(text) > 400 || strings.ContainsRune(text, 0) || strings.ContainsRune(text, 0x1b) {
			t.Errorf("MCP start with a NUL or 1 MiB name/label: error=%v %q", isErr, cut(text))
		}
	}
	if out := w.ok("list"); out != "no jobs\n" {
		t.Errorf("a refused MCP start left a job: %q", out)
	}
	// MCP text names the job escaped; its JSON keeps the name exact.
	text, isErr := mcpCall(t, cs, "execute_command", map[string]any{"command": "true", "name": "m\x1b]0;x\x07\u202e"})
	if isErr || !strings.Contains(text, `m\x1b]0;x\x07\u202e`) {
		t.Errorf("MCP start of a job with escapes in its name: error=%v %q", isErr, text)
	}
	if first, _, _ := strings.Cut(text, "\n"); controlRE.MatchString(first) {
		t.Errorf("MCP text line carries a raw control character: %q", first)
	}
	// tmux session names come from the id alone.
	t.Run("tmux session name", func(t *testing.T) {
		needTool(t, "tmux")
		w.scope = "tmux"
		id := w.start("--tmux", "--name", "x\x1b]0;t\x07;rm -rf ~ $(id)", "--", "sleep", "30")
		var s struct {
			Job struct {
				TmuxSession string `json:"tmux_session"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(w.ok("--json", "status", id)), &s); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(s.Job.TmuxSession) {
			t.Errorf("tmux session name %q is not [A-Za-z0-9_-]+", s.Job.TmuxSession)
		}
		w.jobs("kill", id)
	})
	checkTables(t, w)
	t.Logf("MATRIX-FIGURE %s", "9 hostile names/labels/scopes stored byte-exact, 0 raw control bytes in list/status/poll, JSON \\u001b; NUL, invalid UTF-8, >256 B name, >4 KiB label: exit 2")
}

// checkTables fails unless the jobs table is intact after the injections.
func checkTables(t *testing.T, w *world) {
	t.Helper()
	var n int
	if err := w.sqlDB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil || n == 0 {
		t.Errorf("jobs table after injection: %d rows, %v", n, err)
	}
	w.integrity()
}

// Row C7 guards: a malformed or pathological regular expression is refused
// before anything blocks, in one capped line with exit 2, and a valid but
// backtracking-prone one matches in linear time.
func TestC7BadAndPathologicalRegex(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--", "sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' a; echo")
	w.waitTerminal(id, 30*time.Second)
	bad := []string{"[", "(a{1000}){1000}", strings.Repeat("(", 1001) + strings.Repeat(")", 1001),
		strings.Repeat("(", 50000), "\x1b]0;x\x07[", "a{1001}"}
	for _, re := range bad {
		for _, args := range [][]string{{"log", id, "--grep", re}, {"poll", id, "--grep", re}, {"wait", "--until", re, id}} {
			checkErrorLine(t, w.jobs(args...), 2)
		}
	}
	// --until is checked before the wait: on a running job it must not block.
	live := w.start(helper("until-eof")...)
	began := time.Now()
	checkErrorLine(t, w.jobs("wait", "--until", "(", live), 2)
	// The job never ends: returning at all is the outcome.
	t.Logf("an invalid --until on a running job returned after %v", time.Since(began).Round(time.Millisecond))
	w.ok("write", live, "--eof")
	// (a*)*b against 1 MiB of a: RE2 is linear; a backtracking engine would
	// not return at all.
	began = time.Now()
	r := w.jobs("log", id, "--grep", "(a*)*b", "--offset", "0", "--limit", "2000000")
	took := time.Since(began)
	if r.code != 0 || strings.Contains(r.stdout, "a") {
		t.Errorf("(a*)*b over 1 MiB of a: %v", r)
	}
	t.Logf("MATRIX-FIGURE %s", "6 bad patterns × log/poll/wait: exit 2, one line ≤ 400 chars; (a*)*b over 1 MiB of a in "+took.Round(time.Millisecond).String())
}

// Row D1 guards: each MCP process action, given another scope's job by full
// id, unique prefix or name, answers exactly as for a job that does not
// exist and changes nothing; list, events and gc of the other scope show
// nothing of it.
func TestD1ScopeIsolationMCPActions(t *testing.T) {
	t.Parallel()
	w, id, missing := aliceJobSeenByBob(t)
	cs := w.mcp()
	actions := []map[string]any{
		{"action": "poll"}, {"action": "log"}, {"action": "status"}, {"action": "write", "data": "x"},
		{"action": "write", "eof": true}, {"action": "send_keys", "keys": []string{"Enter"}}, {"action": "capture"},
		{"action": "kill"}, {"action": "kill", "signal": "INT"}, {"action": "clear"}, {"action": "remove"},
		{"action": "wait", "timeout": 1},
	}
	refs := [][2]string{{id, missing}, {id[:6], missing[:6]}, {"alicejob", "nosuchjob"}}
	for _, a := range actions {
		for _, ref := range refs {
			args := func(r string) map[string]any {
				m := map[string]any{"sessionId": r}
				for k, v := range a {
					m[k] = v
				}
				return m
			}
			tools := []string{"process"}
			switch a["action"] {
			case "kill", "clear", "remove":
				tools = append(tools, "kill_process") // process's three alone
			}
			for _, tool := range tools {
				began := time.Now()
				other, otherErr := mcpCall(t, cs, tool, args(ref[0]))
				took := time.Since(began)
				none, noneErr := mcpCall(t, cs, tool, args(ref[1]))
				if otherErr != noneErr || strings.ReplaceAll(other, ref[0], "REF") != strings.ReplaceAll(none, ref[1], "REF") {
					t.Errorf("%s %v on another scope's job answers unlike a missing one:\n%q (error %v)\n%q (error %v)", tool, a, other, otherErr, none, noneErr)
				}
				if a["action"] == "wait" {
					t.Logf("%s wait on another scope's job answered in %v", tool, took.Round(time.Millisecond))
				}
			}
		}
	}
	if text, _ := mcpCall(t, cs, "process", map[string]any{"action": "list"}); strings.Contains(text, id) || strings.Contains(text, "alicejob") {
		t.Errorf("bob's MCP list shows alice's job: %q", text)
	}
	for _, args := range [][]string{{"list"}, {"--json", "list"}, {"events"}, {"gc"}, {"--json", "gc"}} {
		if out := w.ok(args...); strings.Contains(out, id) || strings.Contains(out, "alicejob") {
			t.Errorf("bob's jobs %v shows alice's job: %q", args, out)
		}
	}
	w.scope = "alice"
	if j := w.poll(id); j.Status != "running" {
		t.Errorf("alice's job is %s after bob's actions", j.Status)
	}
	if out := w.ok("log", id); out != "started\n" {
		t.Errorf("alice's job output is %q after bob's actions", out)
	}
	w.ok("write", id, "--eof")
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Errorf("alice's job ended %s", j.Status)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d MCP actions × id, prefix, name: answers identical to a random id; list/events/gc show nothing; job untouched", len(actions)))
}
