package e2e

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Row C8 guards: malformed --env is refused before any spawn; an
// environment too big for exec ends the job failed with the reason; what a
// job's environment holds (PATH, LD_PRELOAD, JOBS_DB, GODEBUG,
// MODERNC_SQLITE_OFD_LOCK) never reaches the supervisor; the shell is run
// by absolute path; and JOBS_DB is a path taken literally, never a DSN.
func TestC8EnvironmentAbuse(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, env := range []string{"=v", "K", "A B=1", "1A=x", "K\n=v", strings.Repeat("\x1b", 1000) + "=v"} {
		checkErrorLine(t, w.jobs("start", "--env", env, "--", "true"), 2)
	}
	if out := w.ok("list"); out != "no jobs\n" {
		t.Fatalf("a refused --env started a job: %q", out)
	}
	// Duplicates: the last value wins, the name is recorded once.
	id := w.start("--env", "A=1", "--env", "A=2", "--env", "B=x=y", "--", "sh", "-c", `echo "A=$A B=$B"`)
	w.waitTerminal(id, 30*time.Second)
	if out := w.ok("log", id); out != "A=2 B=x=y\n" {
		t.Errorf("duplicate --env: child saw %q, want A=2 B=x=y", out)
	}
	if j, _ := w.status(id); strings.Join(j.EnvNames, ",") != "A,B" {
		t.Errorf("env_names %v, want [A B]", j.EnvNames)
	}
	// Hostile variables in a job's environment are the job's alone.
	sup := 0
	hostile := []string{"PATH=", "LD_PRELOAD=/nonexistent/evil.so", "JOBS_DB=" + filepath.Join(w.base, "evil.db"),
		"GODEBUG=panicnil=1,madvdontneed=0", "MODERNC_SQLITE_OFD_LOCK=1", "XDG_RUNTIME_DIR=/nonexistent", "JOBS_SCOPE=other"}
	var args []string
	for _, kv := range hostile {
		args = append(args, "--env", kv)
	}
	id = w.start(append(args, `echo "PATH=[$PATH] DB=$JOBS_DB"; ls`)...)
	j := w.waitTerminal(id, 30*time.Second)
	sup = w.supervisorPID()
	if out := w.ok("log", id); !strings.Contains(out, "PATH=[] DB="+filepath.Join(w.base, "evil.db")) || j.Status != "failed" {
		t.Errorf("job with PATH= (ls must not be found, sh must still run): %s, output %q", j.Status, out)
	}
	next := w.start("--", "sh", "-c", "echo fine")
	if j := w.waitTerminal(next, 30*time.Second); j.Status != "done" || w.ok("log", next) != "fine\n" {
		t.Errorf("the next job after a hostile environment: %s", j.Status)
	}
	if pid := w.supervisorPID(); pid != sup {
		t.Errorf("the supervisor changed from %d to %d", sup, pid)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sup))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range hostile {
		if strings.Contains("\x00"+string(environ), "\x00"+kv+"\x00") {
			t.Errorf("the supervisor's environment holds the job's %s", kv)
		}
	}
	if _, err := os.Stat(filepath.Join(w.base, "evil.db")); err == nil {
		t.Errorf("a job's JOBS_DB made the supervisor create %s", filepath.Join(w.base, "evil.db"))
	}
	// E2BIG: 3 MiB of environment cannot be exec'd; only MCP can carry it.
	cs := w.mcp()
	text, isErr := mcpCall(t, cs, "execute_command", map[string]any{
		"command": "echo never", "env": map[string]any{"BIG": strings.Repeat("x", 3<<20)}, "background": true,
	})
	ids := regexp.MustCompile(`[a-z2-7]{13}`).FindString(text)
	if ids == "" {
		t.Fatalf("MCP start with 3 MiB of env: error=%v %q", isErr, cut(text))
	}
	big := w.waitTerminal(ids, 30*time.Second)
	if big.Status != "failed" || !strings.Contains(big.Reason, "argument list too long") {
		t.Errorf("job with 3 MiB of env: %s, reason %q; want failed, argument list too long", big.Status, big.Reason)
	}
	for _, env := range []map[string]any{{"A=B": "c"}, {"": "x"}, {"K": "a\x00b"}, {"K\x00": "x"}} {
		if text, isErr := mcpCall(t, cs, "execute_command", map[string]any{"command": "true", "env": env}); !isErr || len(text) > 400 {
			t.Errorf("MCP env %q accepted: %q", env, cut(text))
		}
	}
	checkDSNLiteral(t)
	t.Logf("MATRIX-FIGURE %s", "6 bad --env: exit 2, nothing spawned; 3 MiB env: failed (argument list too long); 7 hostile vars: supervisor unchanged; JOBS_DB with ?_pragma/ATTACH: literal file, WAL, no extra file")
}

// checkDSNLiteral runs jobs with a JOBS_DB that is a path holding a query
// string with pragmas and an ATTACH, and checks the path was taken as a
// file name: that file exists and is in WAL mode, the pragma did not run,
// and no attached database appeared.
func checkDSNLiteral(t *testing.T) {
	t.Helper()
	w := newWorld(t)
	dir := filepath.Join(w.base, "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name := "x.db?_pragma=journal_mode(delete)&_pragma=foreign_keys(0);ATTACH DATABASE 'evil.db' AS e;--"
	path := filepath.Join(dir, name)
	w.extra = append(w.extra, "JOBS_DB="+path)
	id := w.start("--", "true")
	w.waitTerminal(id, 30*time.Second)
	w.stop()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), name) {
			t.Errorf("JOBS_DB with a query string made %q", e.Name())
		}
	}
	for _, p := range []string{filepath.Join(dir, "x.db"), filepath.Join(dir, "evil.db"), "evil.db", "/evil.db"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("JOBS_DB with a query string made %s", p)
		}
	}
	// Opened without pragmas, so journal_mode reads what the file holds.
	d, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var mode string
	var n int
	if err := d.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("the literal database is in journal mode %q (%v), want wal: the path's pragma ran", mode, err)
	}
	if err := d.QueryRow(`SELECT count(*) FROM jobs WHERE id = ?`, id).Scan(&n); err != nil || n != 1 {
		t.Errorf("the job is not in the literal database: %d, %v", n, err)
	}
}
