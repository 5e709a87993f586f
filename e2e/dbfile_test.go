package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// fgSupervisor is a `jobs supervise` the test started.
type fgSupervisor struct {
	log    *lockedBuffer
	exited chan struct{} // closed once it has exited, err set
	err    error
}

// superviseForeground runs `jobs supervise` for the world with its log
// captured, and waits until it serves default.sock.
func (w *world) superviseForeground() *fgSupervisor {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(w.dbPath()), 0o700); err != nil {
		w.t.Fatal(err)
	}
	log := &lockedBuffer{}
	c := w.cmd("supervise")
	c.Stderr = log
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	s := &fgSupervisor{log: log, exited: make(chan struct{})}
	go func() { s.err = c.Wait(); close(s.exited) }()
	w.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
		}
	})
	sock := filepath.Join(protocol.RuntimeDirFor(w.run, w.dbPath()), "default.sock")
	waitFor(w.t, 10*time.Second, "the supervisor's socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return s
}

// oneErrorLine fails the test unless r failed with exactly one line on stderr,
// starting "jobs: " and containing want.
func oneErrorLine(t *testing.T, r result, want string) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("succeeded, want a failure: %v", r)
		return
	}
	if !strings.HasPrefix(r.stderr, "jobs: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("want one line \"jobs: …%s…\": %v", want, r)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("a stack trace on stderr: %v", r)
	}
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const tickScript = `for i in $(seq 1 20); do echo tick $i; sleep 0.1; done`

func tickOutput() string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "tick %d\n", i)
	}
	return b.String()
}

// Row B22 guards: a supervisor whose database file is removed or replaced
// notices (device and inode against a stat of the path), refuses new jobs
// with one line, gives the path to a new supervisor, finishes its running
// jobs into the file it has open and exits, never writing into the new
// file.
func TestB22DatabaseRemovedOrReplacedUnderSupervisor(t *testing.T) {
	t.Parallel()
	// The first start after the file is replaced may reach the old
	// supervisor as it retires, with its job ended already (a loaded
	// machine): it gets the refusal, not "call supervisor: EOF" from a
	// supervisor exiting under its request.
	for _, how := range []string{"rm", "mv", "mv over"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			sup := w.superviseForeground()
			log := sup.log
			id := w.start("--no-stdin", "--", "sh", "-c", tickScript)
			w.waitOutput(id, "tick 2")
			moved := filepath.Join(w.base, "moved.db")
			switch how {
			case "rm": // the main file only, as a user would
				if err := os.Remove(w.dbPath()); err != nil {
					t.Fatal(err)
				}
			case "mv":
				if err := os.Rename(w.dbPath(), moved); err != nil {
					t.Fatal(err)
				}
			case "mv over": // another jobs database renamed onto the path
				other := filepath.Join(w.base, "other.db")
				d, err := db.Open(context.Background(), other)
				if err != nil {
					t.Fatal(err)
				}
				d.Close()
				if err := os.Rename(other, w.dbPath()); err != nil {
					t.Fatal(err)
				}
			}
			// The first start reaches the old supervisor (or, when its
			// once-a-second check came first, a new one).
			first := w.jobs("start", "--no-stdin", "--", "echo", "first")
			refused := first.code != 0
			if refused {
				oneErrorLine(t, first, "jobs: database "+w.dbPath()+" was removed or replaced while the supervisor ran; start again")
			}
			second := w.start("--no-stdin", "--", "echo", "second")
			j := w.waitTerminal(second, 30*time.Second)
			if j.Status != "done" || j.Supervisor == "" {
				t.Errorf("the start after the replacement: %+v", j)
			}
			list := w.ok("list")
			if !strings.Contains(list, second) || strings.Contains(list, id) {
				t.Errorf("the new database lists:\n%s", list)
			}
			if !refused && !strings.Contains(w.ok("list"), strings.TrimSpace(first.stdout)) {
				t.Errorf("the first start's job is not in the new database: %v", first)
			}
			waitFor(t, 10*time.Second, "the supervisor's log line", func() bool {
				return strings.Contains(log.String(), "was removed or replaced")
			})
			if n := strings.Count(log.String(), "was removed or replaced"); n != 1 {
				t.Errorf("the supervisor said it %d times:\n%s", n, log)
			}
			// The old supervisor ends once its job has.
			select {
			case <-sup.exited:
				if sup.err != nil {
					t.Errorf("the old supervisor: %v\n%s", sup.err, log)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the old supervisor did not exit after its job\n%s", log)
			}
			for _, p := range []string{filepath.Dir(w.dbPath()), w.dbPath()} {
				want := os.FileMode(0o600)
				if p == filepath.Dir(w.dbPath()) {
					want = 0o700
				}
				if m := mode(t, p); m.Perm() != want {
					t.Errorf("%s: %v, want %v", p, m.Perm(), want)
				}
			}
			w.integrity()
			if logText := log.String(); strings.Contains(logText, "not found") || strings.Contains(logText, "FOREIGN KEY") {
				t.Errorf("the old supervisor wrote to the new database:\n%s", logText)
			}
			figure := fmt.Sprintf("%s: first start %s; old job's supervisor exited after it; new database 0600 in 0700", how,
				map[bool]string{true: "refused in one line", false: "served by a new supervisor"}[refused])
			if how == "mv" {
				// The moved file got the job's end and all its output.
				mw := *w
				mw.extra = append(append([]string{}, w.extra...), "JOBS_DB="+moved)
				old, _ := mw.status(id)
				out := mw.ok("log", id, "--offset", "0")
				if old.Status != "done" || out != tickOutput() {
					t.Errorf("the moved database holds %s and %q", old.Status, out)
				}
				figure += fmt.Sprintf("; moved file holds the job %s with %d of %d bytes", old.Status, len(out), len(tickOutput()))
			}
			t.Logf("MATRIX-FIGURE %s", figure)
		})
	}
}

// sqlOpen opens path as an auditor would, with the project's settings.
func sqlOpen(path string) (*sql.DB, error) { return sql.Open("sqlite", db.DSN(path)) }

// corruptions damage a database of finished jobs in the ways a disk, a
// crash or a careless copy do.
var corruptions = []struct {
	name string
	do   func(t *testing.T, path string)
}{
	{"garbage in page 2", func(t *testing.T, path string) {
		writeAt(t, path, 4096, garbage(4096))
	}},
	{"garbage in a data page of the jobs table", func(t *testing.T, path string) {
		page := rootPage(t, path, "jobs")
		writeAt(t, path, (page-1)*4096+8, garbage(4096-8))
	}},
	{"garbage in a data page of the output", func(t *testing.T, path string) {
		page := rootPage(t, path, "chunks")
		writeAt(t, path, (page-1)*4096+8, garbage(4096-8))
	}},
	{"truncated to half", func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}},
	{"truncated to 50 bytes", func(t *testing.T, path string) {
		if err := os.Truncate(path, 50); err != nil {
			t.Fatal(err)
		}
	}},
}

func garbage(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + 7)
	}
	return b
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// stale makes every job of the sound database at path last read long ago,
// with no record that its processes are gone.
func stale(t *testing.T, path string) {
	t.Helper()
	d, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`UPDATE jobs SET last_access_at = '2000-01-01T00:00:00.000Z', survivors_gone = 0`); err != nil {
		t.Fatal(err)
	}
}

// rootPage reads the root page of table from the sound database.
func rootPage(t *testing.T, path, table string) int64 {
	t.Helper()
	d, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var page int64
	if err := d.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = ?`, table).Scan(&page); err != nil {
		t.Fatal(err)
	}
	return page
}

// finishedWorld is a world with a few finished jobs, its supervisor
// stopped and the WAL folded into the database file.
func finishedWorld(t *testing.T) (*world, string) {
	t.Helper()
	w := newWorld(t)
	var id string
	for i := 0; i < 3; i++ {
		id = w.start("--no-stdin", "--", "sh", "-c", "seq 1 20000")
		w.waitTerminal(id, 30*time.Second)
	}
	w.stop()
	if _, err := os.Stat(w.dbPath() + "-wal"); err == nil {
		t.Fatalf("the WAL is still there after the supervisor ended")
	}
	return w, id
}

// Row B12 guards: a damaged database is found before a supervisor writes
// or spawns; every verb that meets the damage says "database corrupt: PATH"
// in one line and exits 1, no job starts, and the file's bytes are never
// changed.
func TestB12CorruptDatabaseRefused(t *testing.T) {
	t.Parallel()
	var figures []string
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			w, id := finishedWorld(t)
			// Every write a read may make is due: the access of a job
			// last read long ago, and the record that its processes are
			// gone (which the supervisor may have made before it ended).
			stale(t, w.dbPath())
			c.do(t, w.dbPath())
			before := fileSHA(t, w.dbPath())
			marker := filepath.Join(w.base, "ran")
			want := "jobs: database corrupt: " + w.dbPath()

			oneErrorLine(t, w.jobs("start", "--no-stdin", "--", "touch", marker), want)
			oneErrorLine(t, w.jobs("supervise"), want)
			if after := fileSHA(t, w.dbPath()); after != before {
				t.Errorf("the corrupt file was changed by a refused start or supervise")
			}
			// A read that meets the damage refuses and writes nothing. One
			// that does not meet it (a status of a job whose damaged page
			// it never reads) may record its access, as any read of a
			// finished job does once a second: that is a write of an
			// undamaged page, so each read is checked on its own.
			for _, verb := range [][]string{{"list"}, {"poll", id}, {"poll", "--new", id}, {"log", id}, {"log", "--clean", id},
				{"log", "--grep", "99", id}, {"--json", "status", id}} {
				pre := fileSHA(t, w.dbPath())
				r := w.jobs(verb...)
				if r.code != 0 {
					oneErrorLine(t, r, want)
					if fileSHA(t, w.dbPath()) != pre {
						t.Errorf("%v refused the corrupt file and changed it", verb)
					}
				}
			}
			before = fileSHA(t, w.dbPath())
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a job ran on the corrupt database")
			}
			var supervisors int
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				var pid int
				if _, err := fmt.Sscan(e.Name(), &pid); err == nil && isSupervisorOf(pid, jobsBin) {
					if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(b, []byte(w.dbPath())) {
						supervisors++
					}
				}
			}
			if supervisors != 0 {
				t.Errorf("%d supervisors run on the corrupt database", supervisors)
			}

			// The public package says the same, with a sentinel.
			ctx := context.Background()
			cl, err := jobs.Open(ctx, jobs.Options{DB: w.dbPath()})
			if err == nil {
				_, err = cl.Start(ctx, jobs.Spec{Command: "touch " + marker})
				cl.Close()
			}
			if !errors.Is(err, jobs.ErrCorrupt) {
				t.Errorf("pkg/jobs: %v, want ErrCorrupt", err)
			}
			if after := fileSHA(t, w.dbPath()); after != before {
				t.Errorf("the corrupt file was changed")
			}
			figures = append(figures, c.name)
		})
	}
	t.Logf("MATRIX-FIGURE refused in one line, 0 jobs started, 0 bytes changed: %s", strings.Join(figures, "; "))
}

// Row B12 guards (the -wal deleted after a crash): a database whose -shm
// shows changes that only the deleted WAL held is refused in one line;
// otherwise the verdict is SQLite's: a database that SQLite reads
// consistently without its WAL is used, one it finds damaged is refused in
// one line; never a misleading error.
func TestB12WALDeletedAfterCrash(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	n := min(envInt64("JOBS_E2E_FLOOD_BYTES", 16<<20), 16<<20)
	id := w.start("--no-stdin", "--max-output", "0", "--", helperBin, "e2e-helper", "flood", fmt.Sprint(n))
	waitFor(t, 30*time.Second, "output to flow", func() bool { return w.poll(id).OutputBytes > 1<<20 })
	// Not w.supervisorPID: its connection would stay open, and a process
	// that has the database open keeps SQLite from rebuilding the WAL
	// index that still counts the deleted WAL's frames.
	d, err := sqlOpen(w.dbPath())
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	err = d.QueryRow(`SELECT pid FROM supervisors WHERE ended_at IS NULL AND kind = 'detached'`).Scan(&pid)
	d.Close()
	if err != nil || !isSupervisorOf(pid, jobsBin) {
		t.Fatalf("find the supervisor: %d %v", pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Until its last thread has exited, a killed process still holds its
	// files and SQLite's locks on them, even while it reads as a zombie.
	waitFor(t, 10*time.Second, "the supervisor to die and let go of its files", func() bool {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		return !procAlive(pid) && len(fds) == 0
	})
	walSize := int64(-1)
	if fi, err := os.Stat(w.dbPath() + "-wal"); err == nil {
		walSize = fi.Size()
	}
	frames, copied, _ := shmFrames(t, w.dbPath()+"-shm")
	if err := os.Remove(w.dbPath() + "-wal"); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	verdict := sqliteVerdict(t, w.dbPath())
	r := w.jobs("list")
	if frames > copied {
		// The -shm shows changes the deleted WAL held: refused, whatever
		// SQLite would make of the rest (TestE7DeletedWALDetected).
		oneErrorLine(t, r, "jobs: database corrupt: "+w.dbPath()+": its write-ahead log")
		verdict = fmt.Sprintf("%s; %d of %d frames lost: refused", verdict, frames-copied, frames)
	} else if verdict == "ok" {
		if r.code != 0 {
			t.Errorf("SQLite reads the database consistently, jobs does not: %v", r)
		}
		w.waitTerminal(w.start("--no-stdin", "--", "true"), 30*time.Second)
	} else {
		oneErrorLine(t, r, "jobs: database corrupt: "+w.dbPath())
		oneErrorLine(t, w.jobs("start", "--", "true"), "jobs: database corrupt: "+w.dbPath())
	}
	t.Logf("MATRIX-FIGURE -wal of %d bytes deleted after kill -9 mid-flood: SQLite says %q, jobs agrees", walSize, verdict)
}

// sqliteVerdict is integrity_check's first line, read-only, on a copy (so
// that the check itself changes nothing).
func sqliteVerdict(t *testing.T, path string) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy.db")
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	d, err := sqlOpen(cp)
	if err != nil {
		return err.Error()
	}
	defer d.Close()
	var res string
	if err := d.QueryRow(`PRAGMA integrity_check(1)`).Scan(&res); err != nil {
		return err.Error()
	}
	return res
}

// Row B10 guards: on a read-only database directory the supervisor is
// never started and no job runs; start says which path and why in one
// line, and reads answer or fail in one line.
func TestB10ReadOnlyDatabaseDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a read-only bind mount (chmod does not stop root)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare -m is refused here: %v %s", err, out)
	}
	w, id := finishedWorld(t)
	dir := filepath.Dir(w.dbPath())
	marker := filepath.Join(w.base, "ran")
	// In a private mount namespace, the database directory read-only.
	script := `set -e
mount --bind "$1" "$1"
mount -o remount,ro,bind "$1"
shift
exec "$@"`
	inRO := func(args ...string) result {
		t.Helper()
		c := exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh", dir, jobsBin}, args...)...)
		c.Env = w.environ()
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{args: args, stdout: out.String(), stderr: errb.String(), code: code}
	}
	if r := inRO("--version"); r.code != 0 {
		t.Skipf("cannot mount read-only here: %v", r)
	}
	want := dir + " is not writable (read-only file system)"
	oneErrorLine(t, inRO("start", "--no-stdin", "--", "touch", marker), want)
	oneErrorLine(t, inRO("supervise"), want)
	readsOK := 0
	for _, verb := range [][]string{{"list"}, {"poll", id}, {"log", id}} {
		if r := inRO(verb...); r.code != 0 {
			oneErrorLine(t, r, want)
		} else {
			readsOK++
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a job ran with the database read-only")
	}
	t.Logf("MATRIX-FIGURE start and supervise refused in one line naming the directory, 0 jobs spawned; %d of 3 reads answered, the rest one line", readsOK)
}

// Row D8 guards: the binary links one SQLite, modernc.org/sqlite; a second
// (mattn/go-sqlite3, cgo) would break SQLite's POSIX lock bookkeeping.
func TestD8OneSQLite(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	c := exec.Command(gobin, "list", "-deps", "./...")
	c.Dir = ".."
	out, err := c.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mattn, modernc := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.Contains(line, "mattn/go-sqlite3"):
			mattn++
		case line == "modernc.org/sqlite":
			modernc++
		}
	}
	if mattn != 0 || modernc != 1 {
		t.Errorf("packages of mattn/go-sqlite3: %d, want 0; modernc.org/sqlite: %d, want 1", mattn, modernc)
	}
	t.Logf("MATRIX-FIGURE go list -deps: %d mattn/go-sqlite3 packages, %d modernc.org/sqlite", mattn, modernc)
}

// Row D3 guards: a database left readable by others (0644, with its -wal
// and -shm, in a 0755 state directory) is made private before SQLite
// opens it: the files lose their group and other bits, the directory
// becomes 0700.
func TestD3WorldReadableDatabaseTightened(t *testing.T) {
	t.Parallel()
	w, id := finishedWorld(t)
	dir := filepath.Dir(w.dbPath())
	// Leave -wal and -shm behind as a crashed process would.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.WriteFile(w.dbPath()+suffix, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{w.dbPath(), w.dbPath() + "-wal", w.dbPath() + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if j, _ := w.status(id); j.Status != "done" {
		t.Fatalf("the old job reads %s", j.Status)
	}
	check := func(when string) {
		t.Helper()
		if m := mode(t, dir); m.Perm() != 0o700 {
			t.Errorf("state directory %s: %v, want 0700", when, m.Perm())
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			p := w.dbPath() + suffix
			if _, err := os.Stat(p); err != nil {
				continue // SQLite removes an empty WAL at its last close
			}
			if m := mode(t, p); m.Perm() != 0o600 {
				t.Errorf("jobs.db%s %s: %v, want 0600", suffix, when, m.Perm())
			}
		}
	}
	check("after a read")
	after := w.start("--no-stdin", "--", "true")
	w.waitTerminal(after, 30*time.Second)
	check("while a supervisor runs")
	t.Logf("MATRIX-FIGURE pre-existing 0644 database, -wal, -shm in a 0755 directory: now 0600 in 0700 at the first read")
}

// Row D3 guards: a database file or state directory owned by another user
// is refused in one line and left as it is (such a file could be read or
// swapped by its owner).
func TestD3OtherUsersDatabaseRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to uid 65534")
	}
	for _, what := range []string{"database", "state directory"} {
		t.Run(what, func(t *testing.T) {
			w, id := finishedWorld(t)
			p := w.dbPath()
			if what == "state directory" {
				p = filepath.Dir(p)
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Skipf("chown: %v", err)
			}
			before := mode(t, p)
			marker := filepath.Join(w.base, "ran")
			want := "is owned by uid 65534, not by us (uid 0): refusing it"
			oneErrorLine(t, w.jobs("start", "--no-stdin", "--", "touch", marker), want)
			oneErrorLine(t, w.jobs("poll", id), want)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a job ran")
			}
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != before || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
				t.Errorf("%s changed: %v uid %d", p, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
			}
			t.Logf("MATRIX-FIGURE %s owned by uid 65534: start and poll refused in one line, file untouched", what)
		})
	}
}
