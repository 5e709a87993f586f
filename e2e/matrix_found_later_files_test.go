package e2e

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/migrations"
)

// superviseDetached runs `jobs supervise` for the world with its output
// captured and waits until it serves default.sock. It returns the process
// and a channel closed once it has exited.
func (w *world) superviseDetached(args ...string) (*exec.Cmd, <-chan struct{}, *lockedBuffer) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(w.dbPath()), 0o700); err != nil {
		w.t.Fatal(err)
	}
	log := &lockedBuffer{}
	c := w.cmd(append([]string{"supervise"}, args...)...)
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	w.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
		}
	})
	sock := filepath.Join(w.runtimeDir(false), "default.sock")
	waitFor(w.t, 30*time.Second, "the supervisor's socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return c, exited, log
}

// startsOK starts `sh -c script` and fails the test unless the start
// succeeded; it returns the job's id.
func (w *world) startsOK(what, script string) string {
	w.t.Helper()
	r := w.jobs("start", "--no-stdin", script)
	if r.code != 0 {
		w.t.Fatalf("%s: %v\nsupervise.log: %s", what, r, readFile(filepath.Join(w.runtimeDir(false), "supervise.log")))
	}
	return strings.TrimSpace(r.stdout)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// Row E1 guards: a supervisor whose runtime directory was wiped under it
// (a cleaner of $XDG_RUNTIME_DIR, a user's rm -rf) neither unlinks the
// socket and lock a newer supervisor made at the same paths when it exits
// (Go's unix listener unlinks its path on Close, whoever's socket is there
// by then), nor leaves clients unable to reach it: it puts its lock and
// sockets back. Before, every start failed with "no answer on
// …/default.sock" until the newer supervisor idled out, 70 s in one run.
func TestE1RuntimeDirWipedUnderLiveSupervisor(t *testing.T) {
	t.Parallel()
	t.Run("old supervisor exits after a new one started", func(t *testing.T) {
		w := newWorld(t)
		old, exited, log := w.superviseDetached("--idle", "1h")
		rt := w.runtimeDir(false)
		if err := os.RemoveAll(filepath.Join(w.run, "jobs")); err != nil {
			t.Fatal(err)
		}
		long := w.startsOK("the first start after the wipe", "sleep 40")
		// The old supervisor ends while the new one (or the old one,
		// having put its sockets back) serves the job. Should it have
		// ended before the signal comes, that end must not be a failure;
		// its log is shown either way.
		err := old.Process.Signal(syscall.SIGTERM)
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("the old supervisor did not exit within 60s of SIGTERM; its log:\n%s", log)
		}
		if err != nil {
			if code := old.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("the old supervisor failed (exit %d) before it was signalled; its log:\n%s", code, log)
			}
			t.Logf("the old supervisor had ended before it was signalled; its log:\n%s", log)
		}
		id := w.startsOK("a start after the old supervisor exited", "echo x")
		w.ok("wait", "--timeout", "60s", id)
		if out := w.ok("log", id); out != "x\n" {
			t.Errorf("the second job wrote %q, want x", out)
		}
		if _, err := os.Lstat(filepath.Join(rt, "default.sock")); err != nil {
			t.Errorf("default.sock after both starts: %v", err)
		}
		w.jobs("kill", long)
		t.Logf("MATRIX-FIGURE wiped runtime dir, old supervisor then exited: 2 of 2 starts succeeded, default.sock kept")
	})
	t.Run("default.sock removed under a live supervisor", func(t *testing.T) {
		w := newWorld(t)
		w.superviseDetached("--idle", "1h")
		began := time.Now()
		w.startsOK("a start before default.sock was removed", "true")
		warm := time.Since(began)
		sock := filepath.Join(w.runtimeDir(false), "default.sock")
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
		began = time.Now()
		id := w.startsOK("a start after default.sock was removed", "echo y")
		took := time.Since(began)
		w.ok("wait", "--timeout", "60s", id)
		if out := w.ok("log", id); out != "y\n" {
			t.Errorf("the job wrote %q, want y", out)
		}
		t.Logf("MATRIX-FIGURE default.sock removed under a live supervisor: the next start succeeded in %v (a warm start: %v)", took.Round(time.Millisecond), warm.Round(time.Millisecond))
	})
	t.Run("a running job is not taken for lost", func(t *testing.T) {
		w := newWorld(t)
		w.superviseDetached("--idle", "1h")
		id := w.startsOK("a start before the wipe", "sleep 40")
		if err := os.RemoveAll(filepath.Join(w.run, "jobs")); err != nil {
			t.Fatal(err)
		}
		// At once, before the supervisor had a chance to put its lock
		// back: a missing lock file of a live supervisor is not a death.
		if j := w.poll(id); j.Status != "running" {
			t.Fatalf("right after the wipe the job reads %s, want running", j.Status)
		}
		other := w.startsOK("a start after the wipe", "echo z")
		w.ok("wait", "--timeout", "60s", other)
		if j := w.poll(id); j.Status != "running" {
			t.Errorf("after another start the job reads %s, want running", j.Status)
		}
		w.jobs("kill", id)
		t.Logf("MATRIX-FIGURE a job of the wiped supervisor stayed running (not lost) through a poll and another start")
	})
}

// every verb that opens a database, with arguments that would do no harm
// on a database of jobs.
var verbsOpening = [][]string{
	{"list"}, {"status", "x"}, {"poll", "x"}, {"log", "x"}, {"events"},
	{"wait", "--timeout", "1s", "x"}, {"gc"}, {"start", "--no-stdin", "--", "true"},
	{"supervise", "--idle", "1s"},
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Row E2 guards: --db naming another program's SQLite file (tables of its
// own, no jobs schema) is refused in one line by every verb, and the file
// is left byte for byte as it was, its mode too: it is looked at
// read-only before anything is created, tightened, turned into a WAL
// database or migrated. Before, `jobs --db app.db list` added jobs' 10
// tables and views to it. Only a new or empty file is set up.
func TestE2ForeignDatabaseRefused(t *testing.T) {
	t.Parallel()
	for _, journal := range []string{"delete", "wal"} {
		t.Run("journal "+journal, func(t *testing.T) {
			w := newWorld(t)
			dir := filepath.Join(w.base, "app")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			app := filepath.Join(dir, "app.db")
			other, err := sql.Open("sqlite", "file:"+app+"?_pragma=journal_mode("+journal+")")
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)`,
				`INSERT INTO users(name) VALUES ('ada'), ('grace')`,
				`CREATE VIEW names AS SELECT name FROM users`,
			} {
				if _, err := other.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := other.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(app, 0o644); err != nil {
				t.Fatal(err)
			}
			sum, files := fileSHA(t, app), dirNames(t, dir)
			for _, args := range verbsOpening {
				r := w.jobs(append([]string{"--db", app}, args...)...)
				oneErrorLine(t, r, "not a jobs database")
				if got := fileSHA(t, app); got != sum {
					t.Fatalf("jobs %s changed the other program's database", args[0])
				}
				if m := mode(t, app); m.Perm() != 0o644 {
					t.Fatalf("jobs %s changed its mode to %v", args[0], m)
				}
			}
			if journal == "delete" {
				if got := dirNames(t, dir); strings.Join(got, " ") != strings.Join(files, " ") {
					t.Errorf("files beside it: %v, before %v", got, files)
				}
			}
			t.Logf("MATRIX-FIGURE %s-journal database of another program: %d of %d verbs refused in one line, file and mode unchanged", journal, len(verbsOpening), len(verbsOpening))
		})
	}
	t.Run("empty file is set up", func(t *testing.T) {
		w := newWorld(t)
		empty := filepath.Join(w.base, "empty.db")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(w.ok("--db", empty, "start", "--no-stdin", "--", "true"))
		w.ok("--db", empty, "wait", "--timeout", "60s", id)
	})
}

// olderSchema makes a jobs database at path with every migration but the
// last applied, as an older jobs would have left it, and returns the
// version it is at.
func olderSchema(t *testing.T, path string) int64 {
	t.Helper()
	d, err := sql.Open("sqlite", db.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, d, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	srcs := p.ListSources()
	older := srcs[len(srcs)-2].Version
	if _, err := p.UpTo(context.Background(), older); err != nil {
		t.Fatal(err)
	}
	// An older jobs that was used: its supervisor is on record.
	if _, err := d.Exec(`INSERT INTO supervisors (id, pid, kind, lock_path, started_at, ended_at) VALUES ('older', 1, 'detached', '/nonexistent', '2026-01-01T00:00:00.000Z', '2026-01-01T00:01:00.000Z')`); err != nil {
		t.Fatal(err)
	}
	return older
}

func schemaVersion(t *testing.T, path string) int64 {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var v int64
	if err := d.QueryRow(`SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Row E10 guards: a read (list, status, poll, log, events, wait) on a
// database whose schema is older than the binary's does not migrate it (a
// supervisor of the older jobs may still be running on it and would meet
// tables it does not know); it says so in one line and names the verbs
// that upgrade it. A writer (start) then upgrades it. Before, every read
// migrated it.
func TestE10ReadsNeverMigrate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := os.MkdirAll(filepath.Dir(w.dbPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	older := olderSchema(t, w.dbPath())
	sum := fileSHA(t, w.dbPath())
	reads := 0
	for _, args := range verbsOpening {
		switch args[0] {
		case "gc", "start", "supervise":
			continue
		}
		reads++
		r := w.jobs(args...)
		oneErrorLine(t, r, "older")
		if !strings.Contains(r.stderr, "jobs start") {
			t.Errorf("the refusal names no verb that upgrades the database: %v", r)
		}
		if v := schemaVersion(t, w.dbPath()); v != older {
			t.Fatalf("jobs %s migrated the database from %d to %d", args[0], older, v)
		}
		if got := fileSHA(t, w.dbPath()); got != sum {
			t.Fatalf("jobs %s changed the database file", args[0])
		}
	}
	id := w.start("--no-stdin", "--", "true")
	w.ok("wait", "--timeout", "60s", id)
	if v := schemaVersion(t, w.dbPath()); v <= older {
		t.Errorf("start left the schema at %d, want it upgraded past %d", v, older)
	}
	w.ok("list")
	t.Logf("MATRIX-FIGURE schema one migration behind (%d): %d of %d reads refused in one line naming 'jobs start', file unchanged; start upgraded it", older, reads, reads)
}

// plantAsNobody makes path a symlink to target, owned by uid 65534, as
// another user of a shared directory would.
func plantAsNobody(t *testing.T, path, target string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// Row E3 guards: what jobs keeps beside a database in a directory other
// users can write (the -status mark; the runtime directory when
// XDG_RUNTIME_DIR is unset) is never reached through another user's
// symlink or file. Before, `jobs --db SHARED/i.db start --wait true` run as
// root after uid 65534 planted SHARED/i.db-status -> /root-only/path
// created /root-only/path. Now every open of such a file is O_NOFOLLOW (and
// O_EXCL when it creates), checked for owner and mode on the descriptor,
// and a planted one is refused in one line; an empty mark of our own left
// 0644 is tightened to 0600.
func TestE3PlantedStatusSymlinkRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant files as uid 65534")
	}
	shared := func(t *testing.T, w *world) string {
		dir := filepath.Join(w.base, "shared")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	var figures []string
	t.Run("symlink at the status mark of a new database", func(t *testing.T) {
		w := newWorld(t)
		dir := shared(t, w)
		private := filepath.Join(w.base, "private")
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(private, "created")
		dbp := filepath.Join(dir, "i.db")
		plantAsNobody(t, dbp+"-status", target)
		r := w.jobs("--db", dbp, "start", "--wait", "--", "true")
		oneErrorLine(t, r, "i.db-status is a symlink")
		if _, err := os.Lstat(target); err == nil {
			t.Fatalf("the symlink's target %s was created", target)
		}
		if _, err := os.Lstat(dbp); err == nil {
			t.Errorf("the database was created before the refusal")
		}
		figures = append(figures, "symlink at a new database's -status: refused, target not created")
	})
	t.Run("planted at the status mark of a database in use", func(t *testing.T) {
		w := newWorld(t)
		dir := shared(t, w)
		dbp := filepath.Join(dir, "i.db")
		id := strings.TrimSpace(w.ok("--db", dbp, "start", "--no-stdin", "--", "true"))
		w.ok("--db", dbp, "wait", "--timeout", "60s", id)
		private := filepath.Join(w.base, "private")
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(private, "created")
		mark := dbp + "-status"
		for _, plant := range []struct {
			name, want string
			do         func()
		}{
			{"symlink", "is a symlink", func() { plantAsNobody(t, mark, target) }},
			{"file of uid 65534", "is owned by uid 65534", func() {
				if err := os.WriteFile(mark, nil, 0o666); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(mark, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			plant.do()
			before, err := os.Lstat(mark)
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"start", "--wait", "--no-stdin", "--", "true"}, {"wait", "--timeout", "5s", id}, {"list"}, {"poll", id},
			} {
				r := w.jobs(append([]string{"--db", dbp}, args...)...)
				oneErrorLine(t, r, plant.want)
			}
			if _, err := os.Lstat(target); err == nil {
				t.Fatalf("the symlink's target %s was created", target)
			}
			after, err := os.Lstat(mark)
			if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the planted %s was changed: %v", plant.name, err)
			}
			figures = append(figures, plant.name+" at -status: start, wait, list, poll refused in one line, untouched")
		}
	})
	t.Run("own empty status mark left 0644 is tightened", func(t *testing.T) {
		w := newWorld(t)
		dir := shared(t, w)
		dbp := filepath.Join(dir, "i.db")
		mark := dbp + "-status"
		if err := os.WriteFile(mark, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(mark, 0o644); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(w.ok("--db", dbp, "start", "--no-stdin", "--", "true"))
		w.ok("--db", dbp, "wait", "--timeout", "60s", id)
		if m := mode(t, mark); m.Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", mark, m)
		}
		figures = append(figures, "own 0644 -status tightened to 0600")
	})
	t.Run("runtime directory beside the database planted", func(t *testing.T) {
		w := newWorld(t)
		dir := shared(t, w)
		dbp := filepath.Join(dir, "i.db")
		run := filepath.Join(dir, "run")
		if err := os.Mkdir(run, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(run, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		w.extra = append(w.extra, "XDG_RUNTIME_DIR=")
		oneErrorLine(t, w.jobs("--db", dbp, "start", "--no-stdin", "--", "true"), "owned by uid 65534")
		if ents, _ := os.ReadDir(run); len(ents) != 0 {
			t.Errorf("%d entries made in the other user's directory", len(ents))
		}
		figures = append(figures, "runtime dir beside the database owned by uid 65534: refused")
	})
	t.Logf("MATRIX-FIGURE %s", strings.Join(figures, "; "))
}
