package e2e

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// fileSums returns the sha256 of a database file and of its -wal ("" when
// there is none), which together hold everything SQLite reads.
func fileSums(t *testing.T, path string) [2]string {
	t.Helper()
	var out [2]string
	for i, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 && i == 1 {
			continue // an empty WAL holds nothing (a reader may create one)
		}
		s := sha256.Sum256(b)
		out[i] = hex.EncodeToString(s[:])
	}
	return out
}

// copyAsHost copies the database at src to dst, whole (VACUUM INTO), as
// the database of a host named host: every supervisor row names it. This
// is what an auditor holds after collecting another machine's jobs.db.
func copyAsHost(t *testing.T, src, dst, host string) {
	t.Helper()
	ctx := context.Background()
	s, err := sql.Open("sqlite", db.DSN(src))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	// A copy of a jobs database is both files (docs/schema.md, "The
	// output data file"), once the output data file exists.
	if _, err := os.Stat(db.OutputPath(src)); err == nil {
		copyOutputData(t, db.OutputPath(src), db.OutputPath(dst))
	}
	d, err := sql.Open("sqlite", db.DSN(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ExecContext(ctx, `UPDATE supervisors SET host = ?`, host); err != nil {
		t.Fatalf("rename host of %s: %v", dst, err)
	}
}

// copyOutputData copies the output data file at src to dst whole, as
// docs/replication.md copies it (VACUUM INTO, on a connection as jobs
// opens it).
func copyOutputData(t *testing.T, src, dst string) {
	t.Helper()
	o, err := sql.Open("sqlite", db.OutputDSN(src))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.ExecContext(context.Background(), `VACUUM INTO ?`, dst); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// readVerbs are the audit's reads of one database, each as a user types it.
func auditReads(dbArgs []string, id string) [][]string {
	var out [][]string
	for _, v := range [][]string{
		{"list", "--all-scopes"},
		{"--json", "list", "--all-scopes"},
		{"status", id},
		{"log", id},
		{"events", "--all-scopes"},
		{"poll", id},
	} {
		out = append(out, append(append([]string{}, dbArgs...), v...))
	}
	return out
}

// read runs a read verb and fails the test unless it exits 0 (log notes
// on stderr what it leaves out).
func (w *world) read(args ...string) string {
	w.t.Helper()
	r := w.jobs(args...)
	if r.code != 0 {
		w.t.Fatalf("%v", r)
	}
	return r.stdout
}

// sweptWorld makes a world whose database holds a finished job with output
// and a job left running by a supervisor that was killed: the state a
// read of the same host would change (the running job marked lost, the
// finished one's last access recorded). It returns the two job ids.
func sweptWorld(t *testing.T) (w *world, done, orphan string) {
	t.Helper()
	w = newWorld(t)
	done = w.start(helper("flood", "100000")...)
	w.ok("wait", done)
	orphan = w.start(helper("ready-idle")...)
	waitFor(t, 10*time.Second, "the job to say ready", func() bool {
		return strings.Contains(w.ok("log", orphan), "ready")
	})
	pid := w.poll(orphan).PID
	_, start, _ := procState(pid)
	t.Cleanup(func() { killLeftover(pid, start) })
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the killed supervisor's lock to be free", func() bool { return lockFree(lock) })
	killLeftover(pid, start)
	return w, done, orphan
}

// Audits never write: a database whose supervisors all ran on another
// host is read, by every read verb and by gc, without a byte of it or of
// its WAL changing; its running job is not marked lost and no access is
// recorded.
func TestAuditOfAnotherHostsDatabaseWritesNothing(t *testing.T) {
	t.Parallel()
	w, done, orphan := sweptWorld(t)
	copyPath := filepath.Join(w.base, "other-host.db")
	copyAsHost(t, w.dbPath(), copyPath, "build-box-2")
	before := fileSums(t, copyPath)

	args := []string{"--db", copyPath}
	for _, a := range append(auditReads(args, done), auditReads(args, orphan)...) {
		w.read(a...)
		if got := fileSums(t, copyPath); got != before {
			t.Fatalf("jobs %s changed the other host's database: %v, was %v", strings.Join(a, " "), got, before)
		}
	}
	var j struct {
		Job job `json:"job"`
	}
	if err := json.Unmarshal([]byte(w.ok("--db", copyPath, "--json", "status", orphan)), &j); err != nil {
		t.Fatal(err)
	}
	if j.Job.Status != "running" {
		t.Errorf("the other host's running job reads %s, want running (never marked lost from here)", j.Job.Status)
	}
	r := w.jobs("--db", copyPath, "gc")
	if r.code != 1 || !strings.Contains(r.stderr, "read-only") || !strings.Contains(r.stderr, "another host") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("gc of another host's database: want one line saying it is read-only (another host), exit 1; got %v", r)
	}
	if got := fileSums(t, copyPath); got != before {
		t.Fatalf("gc changed the other host's database: %v, was %v", got, before)
	}
	t.Logf("FLEET-FIGURE %s", "other host's database: sha256 of file and -wal unchanged after list, list --json, status, log, events, poll and gc; running job left running")
}

// --read-only writes nothing even to this host's own database, where a
// read would otherwise mark the dead supervisor's job lost and record an
// access; verbs that write refuse with one line.
func TestReadOnlyFlagWritesNothing(t *testing.T) {
	t.Parallel()
	w, done, orphan := sweptWorld(t)
	path := w.dbPath()
	before := fileSums(t, path)
	args := []string{"--read-only"}
	for _, a := range append(auditReads(args, done), auditReads(args, orphan)...) {
		w.read(a...)
		if got := fileSums(t, path); got != before {
			t.Fatalf("jobs %s changed the database: %v, was %v", strings.Join(a, " "), got, before)
		}
	}
	for _, a := range [][]string{
		{"--read-only", "gc"},
		{"--read-only", "start", "--", "true"},
		{"--read-only", "kill", orphan},
		{"--read-only", "rm", done},
		{"--read-only", "poll", "--new", done},
	} {
		r := w.jobs(a...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "jobs: database is open read-only: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("want one line saying the database is read-only, exit 1; got %v", r)
		}
		if got := fileSums(t, path); got != before {
			t.Fatalf("jobs %s changed the database: %v, was %v", strings.Join(a, " "), got, before)
		}
	}
	// The same read without --read-only does what a read of this host's
	// database must: it marks the orphan lost. That is the write the flag
	// leaves out.
	if got := w.poll(orphan).Status; got != "lost" {
		t.Errorf("a plain poll left the dead supervisor's job %s, want lost", got)
	}
	if got := fileSums(t, path); got == before {
		t.Errorf("a plain poll changed nothing: the test no longer shows what --read-only leaves out")
	}
	t.Logf("FLEET-FIGURE %s", "--read-only: sha256 unchanged after 12 reads, 5 writing verbs refused in one line; a plain poll then marks the orphan lost")
}

// Two hosts' databases are audited together: list over both names each
// row's host, in text and JSON, and neither file changes.
func TestTwoHostsAuditedTogether(t *testing.T) {
	t.Parallel()
	wa, wb := newWorld(t), newWorld(t)
	ida := wa.start("--name", "build", "--", "echo", "on host a")
	idb := wb.start("--name", "test", "--", "echo", "on host b")
	wa.ok("wait", ida)
	wb.ok("wait", idb)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	copyAsHost(t, wa.dbPath(), a, "host-a")
	copyAsHost(t, wb.dbPath(), b, "host-b")
	sa, sb := fileSums(t, a), fileSums(t, b)

	both := []string{"--db", a, "--db", b}
	text := wa.ok(append(both, "list", "--all-scopes")...)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("list over two databases:\n%s", text)
	}
	for _, want := range []struct{ host, id string }{{"host-a", ida}, {"host-b", idb}} {
		found := false
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) > 2 && f[0] == want.host && f[2] == want.id {
				found = true
			}
		}
		if !found {
			t.Errorf("no row of %s on %s:\n%s", want.id, want.host, text)
		}
	}
	var page struct {
		Jobs []struct {
			ID   string `json:"id"`
			Host string `json:"host"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(wa.ok(append(both, "--json", "list", "--all-scopes")...)), &page); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{}
	for _, j := range page.Jobs {
		hosts[j.ID] = j.Host
	}
	if hosts[ida] != "host-a" || hosts[idb] != "host-b" || len(hosts) != 2 {
		t.Errorf("list --json over two databases: hosts %v", hosts)
	}
	if out := wa.ok(append(both, "log", idb)...); !strings.Contains(out, "on host b") {
		t.Errorf("log of host b's job through both databases: %q", out)
	}
	if out := wa.ok(append(both, "status", ida)...); !strings.Contains(out, "host-a") {
		t.Errorf("status of host a's job names no host:\n%s", out)
	}
	evs := strings.Split(strings.TrimSpace(wa.ok(append(both, "events", "--all-scopes")...)), "\n")
	perHost := map[string]int{}
	for _, l := range evs {
		var e struct {
			Host string `json:"host"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		perHost[e.Host]++
	}
	if perHost["host-a"] == 0 || perHost["host-b"] == 0 || perHost[""] != 0 {
		t.Errorf("events over two databases by host: %v", perHost)
	}
	if r := wa.jobs(append(both, "start", "--", "true")...); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("start with two databases: want a one-line usage error; got %v", r)
	}
	if fileSums(t, a) != sa || fileSums(t, b) != sb {
		t.Fatal("auditing two databases changed one")
	}
	t.Logf("FLEET-FIGURE %s", "list/status/log/events over 2 databases: every row names its host; both files' sha256 unchanged")
}
