package e2e

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/logs"
)

// supervisorRSSBound is the supervisor's peak resident memory the load rows
// accept, whatever the size of the flood: a 64 KiB read buffer per stream
// of each job, and a constant: the appender's pending output (2 × its
// 4 MiB batch), its writer's 10 MiB page cache, the garbage collector's
// headroom over them and the runtime. Without the appender's bound on
// pending output the supervisor would hold what the children write faster
// than SQLite takes it.
const supervisorRSSBound = 80 << 20

// Row A1 guards: eight jobs flooding both streams at once lose no byte, reorder nothing and leave no gap, while the supervisor's memory stays bounded (children are slowed through their pipes instead).
func TestA1FloodZeroLoss(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// Half size under -race, not an eighth: the supervisor's memory bound
	// only shows when the children outrun the database, and an eighth is
	// written as fast as it comes.
	out, errb := int64(32<<20)/scaleOr(2), int64(8<<20)/scaleOr(2)
	jobs := w.startSpews(8, 100, out, errb)
	sup := w.supervisorPID()
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	w.waitEnded(ids, 10*time.Minute)
	hwm := procStatus(sup, "VmHWM") << 10
	d := w.sqlDB()
	chunks, exact, streams := w.checkSpews(d, jobs)
	if hwm <= 0 || hwm > supervisorRSSBound {
		t.Errorf("supervisor peak RSS %s, bound %s", mib(hwm), mib(supervisorRSSBound))
	}
	figure(t, "8 jobs × (%s stdout + %s stderr): %d of %d streams byte-exact in %d chunks; supervisor peak RSS %s (bound %s)",
		mib(out), mib(errb), exact, streams, chunks, mib(hwm), mib(supervisorRSSBound))
}

// Row A7 guards: a command that writes and exits at once keeps both its streams and its exit code (the pipes are drained before the exit is recorded).
func TestA7FastExitKeepsOutput(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	n := int(envInt64("JOBS_E2E_FAST_EXITS", 500/scale()))
	ids := make([]string, n)
	errs := parallel(n, 8, func(i int) error {
		r, err := w.try("start", "--ttl", "0", "--no-stdin", "--", "sh", "-c", "printf x; printf y >&2; exit 3")
		if err != nil {
			return err
		}
		if r.code != 0 {
			return fmt.Errorf("%v", r)
		}
		ids[i] = strings.TrimSpace(r.stdout)
		return nil
	})
	for _, err := range errs {
		t.Fatal(err)
	}
	w.waitEnded(ids, 5*time.Minute)
	d := w.sqlDB()
	bad := 0
	for _, id := range ids {
		var status string
		var exit int
		if err := d.QueryRow(`SELECT status, coalesce(exit_code, -1) FROM jobs WHERE id = ?`, id).Scan(&status, &exit); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		rows, err := d.Query(`SELECT stream, data FROM chunks WHERE job_id = ? ORDER BY seq`, id)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var stream string
			var data []byte
			if err := rows.Scan(&stream, &data); err != nil {
				t.Fatal(err)
			}
			got[stream] += string(data)
		}
		rows.Close()
		if status != "failed" || exit != 3 || got["stdout"] != "x" || got["stderr"] != "y" || len(got) != 2 {
			bad++
			if bad <= 5 {
				t.Errorf("job %s: %s, exit %d, stored %q", id, status, exit, got)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d fast jobs lost output or their exit code", bad, n)
	}
	figure(t, "%d of %d fast-exit jobs stored exactly x / y, exit 3, failed", n-bad, n)
}

// Row A5 guards: thousands of short jobs leave nothing behind in the supervisor: every child is reaped and every pipe and descriptor closed.
func TestA5ChurnLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	n := int(envInt64("JOBS_E2E_CHURN_JOBS", 2000/scale()))
	const concurrent = 50
	churn := func(n int) []error {
		return parallel(n, concurrent, func(i int) error {
			r, err := w.try("start", "--wait", "--no-stdin", "--", "true")
			if err != nil {
				return err
			}
			if r.code != 0 {
				return fmt.Errorf("%v", r)
			}
			return nil
		})
	}
	w.ok("start", "--wait", "--", "true")
	sup := w.supervisorPID()
	dbFile := w.dbPath()
	// SQLite keeps the descriptor of a closed connection open while
	// another connection of the process holds a lock on the file, and
	// reuses it for the next connection: the supervisor's descriptors of
	// the database file grow to the most connections it had open at once,
	// and no further. They are counted apart; every other descriptor
	// (pipes, sockets, /dev/null, the lock) must return to the baseline.
	baseFDs, baseDBFDs := fdsBesides(sup, dbFile)
	baseThreads := procStatus(sup, "Threads")
	for i, err := range churn(n) {
		if i < 5 {
			t.Error(err)
		}
	}
	d := w.sqlDB()
	var done, all int
	if err := d.QueryRow(`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FROM jobs`).Scan(&done, &all); err != nil {
		t.Fatal(err)
	}
	if want := n + 1; done != want || all != want {
		t.Errorf("%d of %d jobs done (%d rows)", done, want, all)
	}
	var zombies map[int]byte
	waitFor(t, 10*time.Second, "no child of the supervisor left", func() bool {
		zombies = childrenOf(sup)
		return len(zombies) == 0
	})
	var fds, dbFDs int
	waitFor(t, 10*time.Second, fmt.Sprintf("the supervisor's descriptors back to %d", baseFDs), func() bool {
		fds, dbFDs = fdsBesides(sup, dbFile)
		return fds <= baseFDs
	})
	if dbFDs > concurrent+8 {
		t.Errorf("the supervisor holds %d descriptors of the database after %d jobs, %d at most at once", dbFDs, n, concurrent)
	}
	threads := procStatus(sup, "Threads")
	// Go keeps the threads it made for blocking system calls, so threads
	// do not return to the baseline; they must not grow with the jobs.
	if threads > baseThreads+32 {
		t.Errorf("supervisor threads %d after %d jobs, %d before", threads, n, baseThreads)
	}
	figure(t, "%d short jobs (≤%d at once): all done; 0 zombies; supervisor fds %d→%d (+ database file %d→%d), threads %d→%d",
		n, concurrent, baseFDs, fds, baseDBFDs, dbFDs, baseThreads, threads)
}

// Row A2 guards: a trickle from eight jobs reaches readers within a second (time-batched flushes) and the children never block on a write.
func TestA2TrickleLatencyNoStall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dur := 5 * time.Second
	if s := envInt64("JOBS_E2E_TRICKLE_SECONDS", 0); s > 0 {
		dur = time.Duration(s) * time.Second
	}
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = w.start(append([]string{"--no-stdin", "--ttl", "0"}, helper("trickle", "10ms", dur.String())...)...)
	}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		stalls  = make([]int64, n)
		lines   = make([]int, n)
		wantLns = make([]int, n)
		wg      sync.WaitGroup
		errs    = make([]error, n)
	)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = followTrickle(w, id, dur+time.Minute, func(seen time.Time, written int64, seq int) error {
				if seq != lines[i] {
					return fmt.Errorf("job %s: line %d after line %d", id, seq, lines[i]-1)
				}
				lines[i]++
				mu.Lock()
				lat = append(lat, seen.Sub(time.Unix(0, written)))
				mu.Unlock()
				return nil
			}, func(stallUS int64, total int) {
				stalls[i], wantLns[i] = stallUS, total
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var maxStall int64
	for i := range ids {
		maxStall = max(maxStall, stalls[i])
		if lines[i] != wantLns[i] {
			t.Errorf("job %s: read %d lines, it wrote %d", ids[i], lines[i], wantLns[i])
		}
	}
	// The figures are the benchmark's (about 100 ms on a quiet machine,
	// reported below); what is asserted is that every line became readable
	// and no write blocked, with a deadline a machine ten times slower and
	// loaded still meets: under stress-ng beside the suite a line took up
	// to 1.9 s here.
	p50, p99, worst := quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
	if worst >= 30*time.Second {
		t.Errorf("a line took %v to be readable (p99 %v), deadline 30s", worst, p99)
	}
	if maxStall >= (30 * time.Second).Microseconds() {
		t.Errorf("a child's write blocked %v, deadline 30s", time.Duration(maxStall)*time.Microsecond)
	}
	figure(t, "%d lines from 8 jobs: visible p50 %v, p99 %v, max %v; longest write stall %v",
		len(lat), p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond),
		(time.Duration(maxStall) * time.Microsecond).Round(time.Microsecond))
}

// followTrickle reads a trickle job's output as it grows, straight from
// the database the way every read verb does (a read transaction over the
// job's chunks past an offset), calling line for each complete line with
// the time the read returned it, until it has read the job's closing
// stderr line and as many lines as that line counts (the two streams are
// separate pipes, so the stderr line may be stored before the last stdout
// lines). Reading in-process keeps the start-up of a reader process, which
// a loaded machine can stretch to most of a second, out of a figure that is
// about the supervisor's flushes.
func followTrickle(w *world, id string, d time.Duration, line func(seen time.Time, written int64, seq int) error, done func(stallUS int64, lines int)) error {
	deadline := time.Now().Add(d)
	read, total := 0, -1
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sqldb := w.sqlDB()
	var off int64
	for ; time.Now().Before(deadline); <-tick.C {
		out, err := readFrom(sqldb, id, off)
		if err != nil {
			return err
		}
		seen := time.Now()
		end := strings.LastIndexByte(out, '\n')
		if end < 0 {
			continue
		}
		off += int64(end + 1)
		for _, l := range strings.Split(out[:end], "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[0] == "L":
				seq, _ := strconv.Atoi(f[1])
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				if err := line(seen, ns, seq); err != nil {
					return err
				}
				read++
			case len(f) == 4 && f[0] == "stall-max-us":
				us, _ := strconv.ParseInt(f[1], 10, 64)
				total, _ = strconv.Atoi(f[3])
				done(us, total)
			default:
				return fmt.Errorf("job %s: unexpected line %q", id, l)
			}
		}
		if read == total {
			return nil
		}
	}
	return fmt.Errorf("job %s: no end of the trickle within %v", id, d)
}

// readFrom returns the job's stored output from byte offset off on, as one
// read transaction.
func readFrom(sqldb *sql.DB, id string, off int64) (string, error) {
	rows, err := sqldb.Query(`SELECT byte_offset, data, size FROM chunks
		WHERE job_id = ? AND byte_offset + coalesce(size, length(data)) > ? ORDER BY byte_offset`, id, off)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var at int64
		var data []byte
		var size sql.NullInt64
		if err := rows.Scan(&at, &data, &size); err != nil {
			return "", err
		}
		if data, err = logs.DecodeChunk(data, size); err != nil {
			return "", err
		}
		if at < off {
			data = data[off-at:]
		}
		b.Write(data)
	}
	return b.String(), rows.Err()
}
