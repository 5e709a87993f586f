package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// Row D3 guards: the database is created 0600 (so its -wal and -shm are
// too) and every directory jobs creates 0700, the supervisor's socket and
// lock 0600, whatever the user's umask.
func TestD3FileModesUnderUmask(t *testing.T) {
	t.Parallel()
	for _, umask := range []string{"000", "022"} {
		t.Run("umask "+umask, func(t *testing.T) {
			w := newWorld(t)
			w.state = filepath.Join(w.base, "new", "state") // jobs creates it
			w.run = filepath.Join(w.base, "new", "run")
			if err := os.MkdirAll(filepath.Dir(w.state), 0o700); err != nil {
				t.Fatal(err)
			}
			c := exec.Command("/bin/sh", "-c", `umask `+umask+`; exec "$0" start --no-stdin -- sh -c 'echo hi'`, jobsBin)
			c.Env = w.environ()
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("start under umask %s: %v\n%s", umask, err, out)
			}
			w.ok("wait", "--timeout", "30s", firstID(t, w))
			checkPrivateFiles(t, w)
			t.Logf("MATRIX-FIGURE umask %s: state dir 0700, database, -wal, -shm 0600, runtime dir 0700, socket and locks 0600", umask)
		})
	}
}

// checkPrivateFiles checks the modes of the world's state and runtime
// files while its supervisor runs.
func checkPrivateFiles(t *testing.T, w *world) {
	t.Helper()
	for _, d := range []string{filepath.Join(w.state, "jobs"), w.run, filepath.Join(w.run, "jobs")} {
		if m := mode(t, d); !m.IsDir() || m.Perm() != 0o700 {
			t.Errorf("%s: %v, want a 0700 directory", d, m)
		}
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		p := w.dbPath() + suffix
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is missing while the supervisor runs", p)
			continue
		}
		if m := mode(t, p); m.Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", p, m)
		}
	}
	rt := protocol.RuntimeDirFor(w.run, w.dbPath())
	if m := mode(t, rt); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("runtime directory %s: %v, want 0700", rt, m)
	}
	ents, err := os.ReadDir(rt)
	if err != nil {
		t.Fatal(err)
	}
	sockets := 0
	for _, e := range ents {
		m := mode(t, filepath.Join(rt, e.Name()))
		if m&os.ModeSocket != 0 {
			sockets++
		}
		if m.Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", e.Name(), m)
		}
	}
	if sockets == 0 {
		t.Errorf("no socket in %s", rt)
	}
}

// firstID returns the id of the newest job of the world's scope.
func firstID(t *testing.T, w *world) string {
	t.Helper()
	m := regexp.MustCompile(`"id": "([a-z2-7]+)"`).FindStringSubmatch(w.ok("--json", "list"))
	if m == nil {
		t.Fatal("no job listed")
	}
	return m[1]
}

func secret(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s3cr3t" + hex.EncodeToString(b)
}

// Environment values never reach the database: neither --env values nor
// the caller's environment (sent to the supervisor as the job's base
// environment). Only the names of --env variables are stored.
func TestEnvValuesNeverStored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	flag, caller := secret(t), secret(t)
	w.extra = append(w.extra, "JOBS_E2E_CALLER_TOKEN="+caller)
	id := w.start("--env", "JOBS_E2E_TOKEN="+flag, "--", "sh", "-c", `test -n "$JOBS_E2E_TOKEN" && test -n "$JOBS_E2E_CALLER_TOKEN" && echo seen`)
	j := w.waitTerminal(id, 30*time.Second)
	if j.Status != "done" {
		t.Fatalf("the job did not see its environment: %s %s", j.Status, w.ok("log", id))
	}
	if len(j.EnvNames) != 1 || j.EnvNames[0] != "JOBS_E2E_TOKEN" {
		t.Errorf("env_names = %v, want [JOBS_E2E_TOKEN]", j.EnvNames)
	}
	w.ok("--json", "status", id)
	w.ok("events", "--job", id)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(w.dbPath() + suffix)
		if err != nil {
			continue
		}
		for _, s := range []string{flag, caller} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("an environment value is stored in %s", filepath.Base(w.dbPath()+suffix))
			}
		}
	}
}

var idPattern = regexp.MustCompile(`^[a-z2-7]{13,}$`)

// Row D2 guards: ids carry at least 64 random bits from crypto/rand: 13+
// base32 characters, every symbol used at every position, no collision in
// 100k, and the id package does not import math/rand.
func TestD2IDEntropy(t *testing.T) {
	t.Parallel()
	const n = 100_000
	seen := make(map[string]bool, n)
	var perPos [13]map[byte]bool
	for i := range perPos {
		perPos[i] = map[byte]bool{}
	}
	for i := 0; i < n; i++ {
		id := db.NewID()
		if !idPattern.MatchString(id) {
			t.Fatalf("id %q is not 13+ lower-case base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("collision after %d ids: %s", i, id)
		}
		seen[id] = true
		for k := range perPos {
			perPos[k][id[k]] = true
		}
	}
	bits := 0
	for k, m := range perPos {
		switch {
		case len(m) >= 32:
			bits += 5
		case len(m) >= 16:
			bits += 4
		default:
			t.Errorf("position %d takes only %d symbols", k, len(m))
		}
	}
	if bits < 64 {
		t.Errorf("ids carry %d bits, want at least 64", bits)
	}
	w := newWorld(t)
	if id := w.start("--", "true"); !idPattern.MatchString(id) {
		t.Errorf("jobs start printed id %q", id)
	}
	checkNoMathRand(t, "../internal/db")
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d ids, 0 collisions, %d bits per id, crypto/rand only", n, bits))
}

// checkNoMathRand fails if a non-test file of the package in dir imports
// math/rand, whose output can be predicted from a few values.
func checkNoMathRand(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("find the id package's files in %s: %v", dir, err)
	}
	crypto := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			switch p, _ := strconv.Unquote(imp.Path.Value); {
			case p == "math/rand" || strings.HasPrefix(p, "math/rand/"):
				t.Errorf("%s imports %s: ids must come from crypto/rand alone", f, p)
			case p == "crypto/rand":
				crypto = true
			}
		}
	}
	if !crypto {
		t.Errorf("no file in %s imports crypto/rand", dir)
	}
}

// Row D5 guards: a symlink planted where the runtime directory or its
// parent goes is refused (Lstat, one level at a time): nothing is created
// at its target and no job starts.
func TestD5SymlinkAtRuntimeDirRefused(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"runtime dir", "its parent"} {
		t.Run(at, func(t *testing.T) {
			w := newWorld(t)
			rt := protocol.RuntimeDirFor(w.run, w.dbPath())
			target := filepath.Join(w.base, "attacker")
			if err := os.Mkdir(target, 0o700); err != nil {
				t.Fatal(err)
			}
			link := rt
			if at == "its parent" {
				link = filepath.Dir(rt)
			} else if err := os.MkdirAll(filepath.Dir(rt), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			r := w.jobs("start", "--", "true")
			if r.code == 0 {
				t.Errorf("start with a symlink at the %s succeeded: %v", at, r)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ") {
				t.Errorf("not a one-line error: %v", r)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("jobs created %d entries in the symlink's target", len(ents))
			}
		})
	}
	t.Logf("MATRIX-FIGURE %s", "symlinked runtime dir (and parent) refused in one line; 0 entries created at the target")
}

// Row D5 guards: a symlink planted at the supervisor's socket path,
// pointing at another listener, never gets the request (which carries the
// caller's whole environment): the CLI Lstats the socket before dialling.
func TestD5SymlinkAtSocketPathRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rt := protocol.RuntimeDirFor(w.run, w.dbPath())
	if err := os.MkdirAll(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(w.base, "evil.sock")
	l, err := net.Listen("unix", evil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			got.Add(1)
			c.Close()
		}
	}()
	if err := os.Symlink(evil, filepath.Join(rt, "default.sock")); err != nil {
		t.Fatal(err)
	}
	r := w.jobs("start", "--", "true")
	if n := got.Load(); n != 0 {
		t.Errorf("the CLI connected to a planted symlink's target %d times (start: %v)", n, r)
	}
	if r.code != 0 && (strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobs: ")) {
		t.Errorf("not a one-line error: %v", r)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("symlinked socket: %d connections reached the planted listener", got.Load()))
}

// Row D1 guards: every verb answers about another scope's job exactly as
// about a job that does not exist (by id, id prefix and name), and changes
// nothing.
func TestD1ScopeIsolationEveryVerb(t *testing.T) {
	t.Parallel()
	w, id, missing := aliceJobSeenByBob(t)
	verbs := [][]string{
		{"poll", "REF"}, {"poll", "REF", "--new"}, {"log", "REF"}, {"write", "REF", "data"}, {"write", "REF", "--eof"},
		{"kill", "REF"}, {"kill", "--signal", "INT", "REF"}, {"status", "REF"}, {"wait", "--timeout", "1s", "REF"},
		{"rm", "REF"}, {"clear", "REF"}, {"capture", "REF"}, {"send-keys", "REF", "Enter"}, {"attach", "--json", "REF"},
		{"events", "--job", "REF"},
	}
	refs := [][2]string{{id, missing}, {id[:6], missing[:6]}, {"alicejob", "nosuchjob"}}
	for _, v := range verbs {
		for _, ref := range refs {
			for _, json := range []bool{false, true} {
				args := func(r string) []string {
					var a []string
					if json {
						a = append(a, "--json")
					}
					for _, x := range v {
						if x == "REF" {
							x = r
						}
						a = append(a, x)
					}
					return a
				}
				other, none := w.jobs(args(ref[0])...), w.jobs(args(ref[1])...)
				norm := func(r result, ref string) string {
					return strings.ReplaceAll(r.stdout+"\x00"+r.stderr, ref, "REF")
				}
				if other.code != none.code || norm(other, ref[0]) != norm(none, ref[1]) {
					t.Errorf("another scope's job answers unlike a missing one:\n%v\n%v", other, none)
				}
			}
		}
	}
	w.scope = "alice"
	j := w.poll(id)
	if j.Status != "running" {
		t.Errorf("alice's job is %s after bob's verbs", j.Status)
	}
	if out := w.ok("log", id); out != "started\n" {
		t.Errorf("alice's job output is %q after bob's verbs", out)
	}
	w.ok("write", id, "--eof")
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
		t.Errorf("alice's job ended %s", j.Status)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d verbs × id, prefix, name × text/JSON: answers identical to a random id; other scope's job untouched", len(verbs)))
}

// aliceJobSeenByBob starts a running job named alicejob in scope alice and
// turns w to scope bob; missing is an id that no job has and that shares
// no six-character prefix with the job's.
func aliceJobSeenByBob(t *testing.T) (w *world, id, missing string) {
	t.Helper()
	w = newWorld(t)
	w.scope = "alice"
	id = w.start("--name", "alicejob", "--", helperBin, "e2e-helper", "until-eof")
	w.waitOutput(id, "started")
	missing = db.NewID()
	for missing[:6] == id[:6] {
		missing = db.NewID()
	}
	w.scope = "bob"
	return w, id, missing
}
