package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/protocol"
)

// oneLineError fails the test unless r failed with one `jobs: …` line
// that contains want.
func oneLineError(t *testing.T, r result, want string) {
	t.Helper()
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("want one line `jobs: …%s…` and a failure; got %v", want, r)
	}
}

// runtimeDir is the world's default runtime directory, created (0700)
// with its parent when mk is set.
func (w *world) runtimeDir(mk bool) string {
	w.t.Helper()
	rt := protocol.RuntimeDirFor(w.run, w.dbPath())
	if mk {
		if err := os.MkdirAll(rt, 0o700); err != nil {
			w.t.Fatal(err)
		}
	}
	return rt
}

// Row D5 guards: a symlink at the lock file or at the supervisors' log is
// refused at once in one line (Lstat before spawning, O_NOFOLLOW plus
// fstat when opening), instead of a supervisor that cannot lock and a
// client timing out on its socket, and nothing is created at its target.
func TestD5SymlinkAtLockFileRefused(t *testing.T) {
	t.Parallel()
	var figure []string
	for _, c := range []struct{ name, what string }{
		{"default.lock", "lock file"},
		{protocol.SupervisorLogName, "log file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			rt := w.runtimeDir(true)
			target := filepath.Join(w.base, "elsewhere")
			if err := os.Symlink(target, filepath.Join(rt, c.name)); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			r := w.jobs("start", "--", "true")
			took := time.Since(began)
			oneLineError(t, r, c.what)
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("the symlink's target was created")
			}
			if c.name == "default.lock" {
				// The supervisor itself refuses it too, in one line,
				// when run by hand.
				oneLineError(t, w.jobs("supervise", "--idle", "1s"), "is a symlink")
				if _, err := os.Lstat(target); err == nil {
					t.Errorf("the symlink's target was created by jobs supervise")
				}
			}
			figure = append(figure, c.name+" in "+took.Round(time.Millisecond).String())
		})
	}
	t.Logf("MATRIX-FIGURE %s", "symlinks refused in one line, targets not created: "+strings.Join(figure, ", "))
}

// Row D5 guards: what sits at the socket path and is not a socket of ours
// is refused and never unlinked, by the CLI and by `jobs supervise`
// (which removes only a stale socket of its own user).
func TestD5FileAtSocketPathNotUnlinked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rt := w.runtimeDir(true)
	sock := filepath.Join(rt, "default.sock")
	if err := os.WriteFile(sock, []byte("not yours\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(sock, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	oneLineError(t, w.jobs("start", "--", "true"), "not a socket")
	oneLineError(t, w.jobs("supervise", "--idle", "1s"), "not a socket")
	b, err := os.ReadFile(sock)
	if err != nil || string(b) != "not yours\n" {
		t.Errorf("the file at the socket path was replaced or removed: %q, %v", b, err)
	}
	t.Logf("MATRIX-FIGURE %s", "regular file at default.sock refused by start and supervise; file kept byte for byte")
}

// Row D5 guards: a runtime directory owned by another user (here nobody,
// mode 0777) is refused in one line, and never chmodded, chowned or
// written into.
func TestD5RuntimeDirOfAnotherUserRefused(t *testing.T) {
	t.Parallel()
	needRoot(t)
	w := newWorld(t)
	rt := w.runtimeDir(false)
	if err := os.MkdirAll(filepath.Dir(rt), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rt, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rt, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(rt, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	oneLineError(t, w.jobs("start", "--", "true"), "owned by uid 65534")
	s := w.jobs("supervise", "--idle", "1s")
	oneLineError(t, s, "owned by uid 65534")
	fi, err := os.Lstat(rt)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o777 || st.Uid != 65534 {
		t.Errorf("the directory was changed: mode %v uid %d", fi.Mode(), st.Uid)
	}
	if ents, _ := os.ReadDir(rt); len(ents) != 0 {
		t.Errorf("jobs created %d entries in another user's directory", len(ents))
	}
	t.Logf("MATRIX-FIGURE %s", "runtime dir of uid 65534 (0777) refused in one line; mode, owner and contents unchanged")
}
