package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/agentjobs/jobs/internal/db"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// litestreamBin finds the litestream binary: on $PATH, else where go
// install puts it (scripts/deps.sh installs it). In CI a missing one fails
// the test; elsewhere it is skipped with the reason.
func litestreamBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("litestream"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "litestream")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("litestream is not installed (scripts/deps.sh installs it)")
	}
	t.Skip("litestream is not installed: JOBS_TEST_LONG=1 scripts/deps.sh installs it, as CI does")
	return ""
}

// replication is one run of litestream replicating a world's database to a
// file replica, watched: the source's commits and the replica's files over
// time, and litestream's log.
type replication struct {
	t       *testing.T
	bin     string
	config  string
	replica string
	dbPath  string
	log     string
	cmd     *exec.Cmd

	mu      sync.Mutex
	commits []walPos              // the source's last commit, as it moved
	landed  map[string]replicated // replica LTX files by name
	maxWAL  int64
	stop    chan struct{}
	stopped chan struct{}
}

// walPos is a position in a WAL: its salts (which change when the WAL
// starts over) and a frame count, seen at a time.
type walPos struct {
	salt  [2]uint32
	frame uint32
	at    time.Time
}

// replicated is an LTX file in the replica: up to where in the source's
// WAL it reaches, and when it was first seen there.
type replicated struct{ walPos }

// startReplication writes a config for dbPath with a file replica and
// starts `litestream replicate`, with its defaults but debug logging (which
// names every snapshot it takes).
func startReplication(t *testing.T, bin, dir, dbPath string) *replication {
	t.Helper()
	r := startReplicationOf(t, bin, dir, dbPath)
	r.started()
	return r
}

// started waits for litestream's first replica file, then watches.
func (r *replication) started() {
	r.t.Helper()
	waitFor(r.t, 30*time.Second, "litestream's first replica file", func() bool { return maxTXID(r.replicaL0()) > 0 })
	r.stop, r.stopped = make(chan struct{}), make(chan struct{})
	go r.watch()
}

// startReplicationOf starts litestream on dbPath, which may not exist yet
// (litestream takes it up once it does), without waiting for it.
func startReplicationOf(t *testing.T, bin, dir, dbPath string) *replication {
	t.Helper()
	r := &replication{
		t: t, bin: bin, dbPath: dbPath,
		config: filepath.Join(dir, "litestream.yml"), replica: filepath.Join(dir, "replica"),
		log:    filepath.Join(dir, "litestream.log"),
		landed: map[string]replicated{},
	}
	cfg := fmt.Sprintf("logging:\n  level: debug\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n", dbPath, r.replica)
	if err := os.WriteFile(r.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "replicate", "-config", r.config)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	t.Cleanup(func() { r.close() })
	return r
}

func (r *replication) replicaL0() string { return filepath.Join(r.replica, "ltx", "0") }

// maxTXID is the highest transaction id among the LTX files in dir (their
// names are MINTXID-MAXTXID.ltx, in hex).
func maxTXID(dir string) uint64 {
	ents, _ := os.ReadDir(dir)
	var n uint64
	for _, e := range ents {
		_, hi, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".ltx"), "-")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(hi, 16, 64); err == nil {
			n = max(n, v)
		}
	}
	return n
}

// lastCommit reads the source's last commit from its WAL index (the -shm):
// mxFrame and the WAL's salts, from the first copy of the index header.
func lastCommit(dbPath string) (walPos, bool) {
	f, err := os.Open(dbPath + "-shm")
	if err != nil {
		return walPos{}, false
	}
	defer f.Close()
	h := make([]byte, 48)
	if _, err := f.ReadAt(h, 0); err != nil {
		return walPos{}, false
	}
	// mxFrame is in the machine's byte order; the salts are the WAL
	// header's bytes, big-endian.
	return walPos{
		frame: binary.NativeEndian.Uint32(h[16:]),
		salt:  [2]uint32{binary.BigEndian.Uint32(h[32:]), binary.BigEndian.Uint32(h[36:])},
	}, true
}

// ltxPos reads where in the source's WAL an LTX file reaches, from its
// header (github.com/superfly/ltx: WALOffset, WALSize, WALSalt1, WALSalt2).
func ltxPos(path string) (walPos, bool) {
	f, err := os.Open(path)
	if err != nil {
		return walPos{}, false
	}
	defer f.Close()
	h := make([]byte, 100)
	if _, err := f.ReadAt(h, 0); err != nil || string(h[:4]) != "LTX1" {
		return walPos{}, false
	}
	pageSize := int64(binary.BigEndian.Uint32(h[8:]))
	end := int64(binary.BigEndian.Uint64(h[48:]) + binary.BigEndian.Uint64(h[56:]))
	if pageSize == 0 || end < 32 {
		return walPos{}, false
	}
	return walPos{
		frame: uint32((end - 32) / (pageSize + 24)),
		salt:  [2]uint32{binary.BigEndian.Uint32(h[64:]), binary.BigEndian.Uint32(h[68:])},
	}, true
}

// watch samples, until stopped, the source's last commit, the files that
// land in the replica and the WAL's size.
func (r *replication) watch() {
	defer close(r.stopped)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		c, ok := lastCommit(r.dbPath)
		ents, _ := os.ReadDir(r.replicaL0())
		r.mu.Lock()
		if n := len(r.commits); ok && (n == 0 || r.commits[n-1].salt != c.salt || r.commits[n-1].frame != c.frame) {
			c.at = now
			r.commits = append(r.commits, c)
		}
		for _, e := range ents {
			if _, seen := r.landed[e.Name()]; seen {
				continue
			}
			if p, ok := ltxPos(filepath.Join(r.replicaL0(), e.Name())); ok {
				p.at = now
				r.landed[e.Name()] = replicated{walPos: p}
			}
		}
		if fi, err := os.Stat(r.dbPath + "-wal"); err == nil {
			r.maxWAL = max(r.maxWAL, fi.Size())
		}
		r.mu.Unlock()
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// lag returns how long after the source committed a transaction the
// replica held it, over every replica file that reached a commit the
// watcher saw: median and max.
func (r *replication) lag() (median, worst time.Duration, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lags []time.Duration
	for _, l := range r.landed {
		// The first sample of the source at or past the file's end.
		for _, c := range r.commits {
			if c.salt == l.salt && c.frame >= l.frame && l.frame > 0 {
				lags = append(lags, max(l.at.Sub(c.at), 0))
				break
			}
		}
	}
	if len(lags) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lags)
	return lags[len(lags)/2], lags[len(lags)-1], len(lags)
}

// caughtUp waits until the replica holds the source's last commit as of
// now: a replica file reaches its place in the WAL.
func (r *replication) caughtUp(d time.Duration) {
	r.t.Helper()
	c, ok := lastCommit(r.dbPath)
	if !ok {
		r.t.Fatal("no WAL index beside the database")
	}
	if c.frame == 0 {
		return // the WAL started over: Litestream had it all first
	}
	waitFor(r.t, d, "the replica to catch up with the source", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.landed {
			if l.salt == c.salt && l.frame >= c.frame {
				return true
			}
		}
		return false
	})
}

// close stops litestream (it syncs once more as it shuts down) and the
// watcher; it returns litestream's exit error.
func (r *replication) close() error {
	if r.stop != nil {
		select {
		case <-r.stop:
		default:
			close(r.stop)
			<-r.stopped
		}
	}
	if r.cmd == nil || r.cmd.ProcessState != nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		return <-done
	}
}

// logStats is what litestream's debug log tells of a run.
type logStats struct {
	snapshots   int      // full snapshots past the first (the replica's start)
	reasons     []string // why it took them
	checkpoints int      // its own checkpoints
	busy        int      // of which SQLite answered busy (another checkpointer, or a writer)
	truncates   int      // TRUNCATE checkpoints it forced on a WAL past truncate-page-n
}

// logStats reads litestream's log: syncs logged with snap=true are full
// snapshots of the database; "checkpoint" lines carry wal_checkpoint's
// result (busy, log, checkpointed).
func (r *replication) logStats() logStats {
	f, err := os.Open(r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var st logStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, `msg="forcing truncate checkpoint"`):
			st.truncates++
		case strings.Contains(l, "msg=checkpoint "):
			st.checkpoints++
			if strings.Contains(l, "result=1,") {
				st.busy++
			}
		case strings.Contains(l, "msg=sync ") && strings.Contains(l, "snap=true"):
			st.snapshots++
			if _, reason, ok := strings.Cut(l, "reason="); ok {
				st.reasons = append(st.reasons, reason)
			}
		}
	}
	// The first sync is a snapshot (it gives no reason): the replica's start.
	st.snapshots = max(st.snapshots-1, 0)
	return st
}

// restore restores the replica into a new file at out.
func (r *replication) restore(out string) {
	r.t.Helper()
	c := exec.Command(r.bin, "restore", "-config", r.config, "-o", out, r.dbPath)
	if b, err := c.CombinedOutput(); err != nil {
		r.t.Fatalf("litestream restore: %v\n%s", err, b)
	}
}

// contents is what a jobs database holds, for comparing a restored copy
// with its source: per job its row's facts, event count and output digest.
func contents(t *testing.T, path string) map[string]string {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	var res string
	if err := d.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check of %s: %q %v", path, res, err)
	}
	out := map[string]string{}
	rows, err := d.QueryContext(ctx, `SELECT id, status, coalesce(exit_code, -1), output_bytes,
		(SELECT count(*) FROM events e WHERE e.job_id = j.id) FROM jobs j ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		var code, bytes, evs int64
		if err := rows.Scan(&id, &status, &code, &bytes, &evs); err != nil {
			t.Fatal(err)
		}
		out[id] = fmt.Sprintf("%s exit %d, %d bytes, %d events", status, code, bytes, evs)
	}
	rows.Close()
	for id, facts := range out {
		h := sha256.New()
		var n int64
		crows, err := d.QueryContext(ctx, `SELECT `+chunkColumns+` FROM chunks WHERE job_id = ? ORDER BY byte_offset`, id)
		if err != nil {
			t.Fatal(err)
		}
		for crows.Next() {
			var b []byte
			var size, ref sql.NullInt64
			if err := crows.Scan(&b, &size, &ref); err != nil {
				t.Fatal(err)
			}
			b = chunkBytes(t, d, b, size, ref)
			h.Write(b)
			n += int64(len(b))
		}
		crows.Close()
		out[id] = fmt.Sprintf("%s, stored %d sha256 %s", facts, n, hex.EncodeToString(h.Sum(nil))[:16])
	}
	var events int
	if err := d.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	out["events"] = strconv.Itoa(events)
	return out
}

// Litestream replicates the database while jobs flood and finish; the
// copy restored from the replica holds every job, event and output byte,
// passes integrity_check, and reading it with every read verb (and gc)
// changes none of its bytes. Run once with jobs' own checkpoints and once
// with JOBS_CHECKPOINT=off, the figures compare replica lag, snapshots and
// WAL size. JOBS_E2E_LITESTREAM_BYTES sizes the flood (default 8 MiB).
func TestLitestreamReplicaRestoresEveryJob(t *testing.T) {
	t.Parallel()
	bin := litestreamBin(t)
	size := envInt64("JOBS_E2E_LITESTREAM_BYTES", 8<<20)
	for _, mode := range []string{"on", "off"} {
		t.Run("checkpoints-"+mode, func(t *testing.T) {
			w := newWorld(t)
			if mode == "off" {
				w.extra = append(w.extra, "JOBS_CHECKPOINT=off")
			}
			w.ok("list") // creates the database
			// Litestream replicates jobs.db (docs/replication.md). The
			// output data file, where a flood that does not compress
			// (random bytes) goes with jobs' own checkpoints, is a second
			// database, which this replication leaves out: with
			// JOBS_CHECKPOINT=off there is none, and with checkpoints it
			// is copied by hand (VACUUM INTO) once the supervisor stopped.
			rep := startReplication(t, bin, w.base, w.dbPath())

			began := time.Now()
			flood := w.start(helper("flood", strconv.FormatInt(size, 10))...)
			short := make([]string, 20)
			for i := range short {
				short[i] = w.start("--", "sh", "-c", fmt.Sprintf("echo short job %d", i))
			}
			w.ok(append([]string{"wait", "--timeout", "10m", flood}, short...)...)
			took := time.Since(began)
			rep.caughtUp(2 * time.Minute)
			w.stop() // its last writes (the supervisor's end) replicate too
			want := contents(t, w.dbPath())
			rep.caughtUp(2 * time.Minute)
			if err := rep.close(); err != nil {
				t.Errorf("litestream: %v", err)
			}
			median, worst, landed := rep.lag()
			ls := rep.logStats()

			restored := filepath.Join(t.TempDir(), "restored.db")
			rep.restore(restored)
			_, err := os.Stat(db.OutputPath(w.dbPath()))
			switch {
			case mode == "off" && err == nil:
				t.Fatal("with JOBS_CHECKPOINT=off a flood's bytes went to the output data file, which Litestream cannot replicate")
			case mode == "on" && err != nil:
				t.Fatalf("with checkpoints the random flood's bytes are not in the output data file: %v", err)
			case mode == "on":
				copyOutputData(t, db.OutputPath(w.dbPath()), db.OutputPath(restored))
			}
			got := contents(t, restored)
			for id, facts := range want {
				if got[id] != facts {
					t.Errorf("job %s: restored %q, source %q", id, got[id], facts)
				}
			}
			if len(got) != len(want) {
				t.Errorf("restored %d jobs and an event count, source %d", len(got), len(want))
			}

			// Auditing the restored copy changes none of its bytes.
			before := [2][2]string{fileSums(t, restored), fileSums(t, db.OutputPath(restored))}
			ro := []string{"--db", restored, "--read-only"}
			for _, a := range [][]string{
				{"list", "--all-scopes"}, {"status", flood}, {"log", flood}, {"events", "--all-scopes"},
			} {
				w.read(append(append([]string{}, ro...), a...)...)
			}
			if r := w.jobs(append(ro, "gc")...); r.code != 1 || !strings.Contains(r.stderr, "read-only") {
				t.Errorf("gc --read-only of the restored copy: %v", r)
			}
			if [2][2]string{fileSums(t, restored), fileSums(t, db.OutputPath(restored))} != before {
				t.Fatal("auditing the restored copy changed it")
			}
			if t.Failed() {
				return
			}
			t.Logf("FLEET-FIGURE checkpoints %s: %d MiB flood + 20 jobs in %v; replica lag median %v, max %v over %d replica files; %d snapshots after the first %v; litestream checkpoints %d (%d busy, %d forced TRUNCATE); WAL peak %.1f MiB; restored copy identical, sha256 unchanged by list, status, log, events, gc",
				mode, size>>20, took.Round(time.Millisecond), median.Round(time.Millisecond), worst.Round(time.Millisecond), landed,
				ls.snapshots, ls.reasons, ls.checkpoints, ls.busy, ls.truncates, float64(rep.maxWAL)/(1<<20))
		})
	}
}

// JOBS_CHECKPOINT=off leaves the WAL to another process: a supervisor
// started with it copies none of a flood into the database file, where one
// started without it does (its checkpointer copies every few MiB). The
// flood is text, whose chunks stay in the database (compressed); random
// bytes would go to the output data file with checkpoints, which has no
// WAL.
func TestCheckpointOffLeavesTheWAL(t *testing.T) {
	t.Parallel()
	const size = 32 << 20 // about 4 MiB once compressed
	for _, mode := range []string{"on", "off"} {
		t.Run("checkpoints-"+mode, func(t *testing.T) {
			w := newWorld(t)
			if mode == "off" {
				w.extra = append(w.extra, "JOBS_CHECKPOINT=off")
			}
			id := w.start(helper("flood-text", strconv.Itoa(size))...)
			w.ok("wait", id)
			// The supervisor still runs (it idles before exiting): what
			// the file holds now is what its checkpoints copied.
			sup := w.supervisorPID()
			if mode == "on" {
				waitFor(t, 30*time.Second, "the checkpointer to copy the flood", func() bool { return fileSizeOf(w.dbPath()) >= 1<<20 })
			} else {
				// Give the checkpointer the rounds it would have had.
				w.ok("start", "--wait", "--", "true")
				if got := fileSizeOf(w.dbPath()); got >= 1<<20 {
					t.Errorf("with JOBS_CHECKPOINT=off the database file grew to %d bytes: jobs checkpointed", got)
				}
			}
			if !procAlive(sup) {
				t.Fatal("the supervisor exited during the test: its last close checkpoints, whatever the setting")
			}
			t.Logf("FLEET-FIGURE checkpoints %s: database file %d KiB after a %d MiB flood of text, WAL %d KiB", mode, fileSizeOf(w.dbPath())>>10, size>>20, fileSizeOf(w.dbPath()+"-wal")>>10)
		})
	}
}

func fileSizeOf(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
