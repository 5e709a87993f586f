package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

func TestConnRoundTrip(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{Limits: db.Limits{Total: 2}})
	ctx := context.Background()
	c, err := protocol.Dial(ctx, s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx); err != nil || c.SupervisorID() != s.ID() {
		t.Fatalf("ping: %v, id %q want %q", err, c.SupervisorID(), s.ID())
	}
	job, err := c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "read-stdin"), Name: "cat"}})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if job.Status != vocab.StatusRunning || job.SupervisorID != s.ID() || job.Cwd != wd {
		t.Errorf("job = %s %s %s, want running in %s under %s", job.Status, job.SupervisorID, job.Cwd, wd, s.ID())
	}
	if _, err := c.Write(ctx, job.ID, []byte{0, 1, 2, 0xff, '\n'}, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseStdin(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s.db, job.ID, 5*time.Second)
	if got, want := output(t, s.db, job.ID, ""), []byte{0, 1, 2, 0xff, '\n', 'e', 'o', 'f', '\n'}; !bytes.Equal(got, want) {
		t.Errorf("output = %q, want %q", got, want)
	}

	// Errors keep their sentinels and typed fields across the socket.
	if _, err := c.Write(ctx, job.ID, []byte("x"), false, 0); !errors.Is(err, vocab.ErrNotRunning) {
		t.Errorf("write to finished: %v, want vocab.ErrNotRunning", err)
	}
	if _, err := c.Write(ctx, "nosuchjob", []byte("x"), false, 0); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("write to missing: %v, want vocab.ErrNotFound", err)
	}
	if _, err := c.Signal(ctx, job.ID, "BOGUS"); !errors.Is(err, vocab.ErrInvalid) {
		t.Errorf("bad signal: %v, want vocab.ErrInvalid", err)
	}
	if err := c.SendKeys(ctx, job.ID, []string{"Enter"}, false); !errors.Is(err, vocab.ErrNotTmux) {
		t.Errorf("send keys to a pipe job: %v, want vocab.ErrNotTmux", err)
	}
	web, err := c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300", Name: "web"}})
	var taken *vocab.NameTakenError
	if !errors.Is(err, vocab.ErrNameTaken) || !errors.As(err, &taken) || taken.ID != web.ID {
		t.Errorf("name taken: %v, want vocab.NameTakenError naming %s", err, web.ID)
	}
	if want := (&vocab.NameTakenError{Name: "web", ID: web.ID}).Error(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("message %v, want it to contain %q", err, want)
	}
	start(t, s, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	_, err = c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "sleep 300"}})
	var limit *vocab.LimitError
	if !errors.Is(err, vocab.ErrLimit) || !errors.As(err, &limit) || limit.Max != 2 {
		t.Errorf("limit: %v, want vocab.LimitError with Max 2", err)
	}
	res, err := c.Kill(ctx, web.ID, 0)
	if err != nil || res.Status != vocab.StatusKilled || !containsInt(res.Signalled, web.PID) {
		t.Errorf("kill over the socket = %+v, %v", res, err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Error(err)
	}
}

// A connection from DialDefault sends its ping ahead of the first request:
// a supervisor answers both, in order.
func TestDialDefaultPingsAhead(t *testing.T) {
	t.Parallel()
	rt := runtimeDir(t)
	s := startSupervisor(t, Config{RuntimeDir: rt, Default: true})
	ctx := context.Background()
	c, err := protocol.DialDefault(ctx, filepath.Join(t.TempDir(), "unused.db"), rt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job, err := c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "echo ahead"}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != vocab.StatusRunning && !job.Status.Terminal() || c.SupervisorID() != s.ID() {
		t.Errorf("job %s, supervisor %q; want it started by %s", job.Status, c.SupervisorID(), s.ID())
	}
	waitDone(t, s.db, job.ID, 5*time.Second)
	if got := string(output(t, s.db, job.ID, "")); got != "ahead\n" {
		t.Errorf("output = %q", got)
	}
	// Later calls on the same connection need no ping.
	if err := c.Ping(ctx); err != nil {
		t.Error(err)
	}
}

func TestSocketAndDirModes(t *testing.T) {
	t.Parallel()
	s := startSupervisor(t, Config{})
	for path, want := range map[string]os.FileMode{s.RuntimeDir(): 0o700, s.SocketPath(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %o, want %o", path, got, want)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	bad, _ := New(Config{DB: s.db, RuntimeDir: link})
	if err := bad.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("open in a symlinked runtime dir: %v, want refusal", err)
	}
}

func TestEnsureDefault(t *testing.T) {
	// Not parallel: it sets XDG_RUNTIME_DIR for the supervisor it starts.
	rt, err := os.MkdirTemp("", "jx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	d := openDB(t)
	ctx := context.Background()
	// Whatever fails below, no detached supervisor outlives the test (the
	// cleanups run last first: this one before the database's directory
	// and rt go). It waits for the process to be gone, not just for its
	// lock: a supervisor writes its database while it shuts down, after
	// letting go of the lock, and a file it makes then would stop the
	// directory's removal.
	//
	// A racing starter's supervisor that was slow to start can take the
	// lock once the winner is gone, and write a row after the first look:
	// the look is repeated until no process but this one holds a file in
	// the database's directory (on a loaded machine one made a file there
	// after the directory's removal began: "directory not empty").
	t.Cleanup(func() {
		dir := filepath.Dir(d.Path)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			stopSupervisors(t, d)
			held := openedUnder(dir)
			if len(held) == 0 {
				return
			}
			if time.Now().After(deadline) {
				for _, pid := range held {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					t.Errorf("after a minute pid %d still holds a file under %s: %s", pid, dir, strings.ReplaceAll(string(cmd), "\x00", " "))
				}
				return
			}
		}
	})

	// Racing starters all end up with the one winner.
	ids := make(chan string, 3)
	for range 3 {
		go func() {
			c, err := protocol.EnsureDefault(ctx, d, "", testExe(t))
			if err != nil {
				t.Error(err)
				ids <- ""
				return
			}
			ids <- c.SupervisorID()
			c.Close()
		}()
	}
	first := <-ids
	for range 2 {
		if id := <-ids; id != first {
			t.Errorf("supervisors %s and %s", first, id)
		}
	}
	if first == "" {
		t.FailNow()
	}
	sup, err := d.FindSupervisor(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if sup.Kind != "detached" || !strings.HasPrefix(sup.SocketPath, filepath.Join(rt, "jobs")) {
		t.Errorf("supervisor = %+v", sup)
	}
	c, err := protocol.EnsureDefault(ctx, d, "", testExe(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job, err := c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Command: "echo detached"}})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, d, job.ID, 5*time.Second)
	if got := string(output(t, d, job.ID, "")); got != "detached\n" {
		t.Errorf("output = %q", got)
	}
	// Its session is its own.
	if info, err := proc.Inspect(sup.PID); err == nil && info.SID != sup.PID {
		t.Errorf("detached supervisor session %d, want its own (%d)", info.SID, sup.PID)
	}
}

func TestWireErrors(t *testing.T) {
	t.Parallel()
	for _, err := range []error{vocab.ErrNotFound, vocab.ErrNotRunning, vocab.ErrStdinClosed, vocab.ErrInvalid, vocab.ErrSupervisorClosed, vocab.ErrNoTmux, vocab.ErrInvalidTransition} {
		wrapped := errors.Join(errors.New("context"), err)
		back := vocab.EncodeError(wrapped).Err()
		if !errors.Is(back, err) || back.Error() != wrapped.Error() {
			t.Errorf("%v came back as %v", err, back)
		}
	}
	amb := &vocab.AmbiguousError{Ref: "ab", Candidates: []string{"abc", "abd"}}
	var got *vocab.AmbiguousError
	if back := vocab.EncodeError(amb).Err(); !errors.As(back, &got) || len(got.Candidates) != 2 || !errors.Is(back, vocab.ErrAmbiguous) {
		t.Errorf("ambiguous came back as %v", back)
	}
	if back := vocab.EncodeError(errors.New("plain")).Err(); back.Error() != "plain" {
		t.Errorf("plain came back as %v", back)
	}
}

// A supervisor with no running job that finds its database file replaced
// on a start retires and exits at once; the start that found it still gets
// its answer, the refusal, rather than a connection closed under it
// ("call supervisor: EOF"). The file watch's own checks are put off, so
// that the start is what finds the file gone: on a loaded machine the
// watch found it first, retired the supervisor before the start arrived,
// and the start met a closed connection (protocol.ErrNoAnswer: nothing
// was run, and pkg/jobs reaches for a new supervisor then).
func TestRetiringSupervisorAnswersTheStartThatRetiredIt(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		d := openDB(t)
		s := startSupervisor(t, Config{DB: d, FileCheckInterval: time.Hour})
		ctx := context.Background()
		c, err := protocol.Dial(ctx, s.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(d.Path); err != nil {
			t.Fatal(err)
		}
		_, err = c.Start(ctx, protocol.StartRequest{Job: db.NewJob{Argv: []string{"true"}}})
		c.Close()
		if !errors.Is(err, vocab.ErrReplaced) {
			t.Fatalf("start %d after the file was removed: %v, want the refusal", i, err)
		}
		select {
		case <-s.Done():
		case <-time.After(time.Minute):
			t.Fatalf("supervisor %d did not exit after retiring with no job", i)
		}
	}
}

// openedUnder returns the pids of the processes other than this one that
// hold a file under dir open (their /proc/PID/fd links).
func openedUnder(dir string) []int {
	var pids []int
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			continue
		}
		pid, err := strconv.Atoi(strings.Split(fd, "/")[2])
		if err != nil || pid == os.Getpid() || slices.Contains(pids, pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// stopSupervisors ends every supervisor of d that is alive and waits for
// its process to be gone, not just for its lock: a supervisor writes its
// database while it shuts down, after letting go of the lock.
func stopSupervisors(t *testing.T, d *db.DB) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	if err := d.SelectContext(ctx, &ids, `SELECT id FROM supervisors WHERE ended_at IS NULL`); err != nil {
		t.Error(err)
		return
	}
	for _, id := range ids {
		sup, err := d.FindSupervisor(ctx, id)
		if err != nil || !protocol.SupervisorAlive(sup) {
			continue
		}
		info, err := proc.Inspect(sup.PID)
		if err != nil {
			continue
		}
		syscall.Kill(sup.PID, syscall.SIGTERM)
		eventually(t, time.Minute, "detached supervisor to exit", func() bool { return !proc.Alive(sup.PID, info.StartTime) })
	}
}
