package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

// maxRunningJobs is the supervisor's limit on running jobs in all scopes
// (runner.DefaultTotal), which bounds how many ends the reserve must hold.
const maxRunningJobs = 200

// TestReserveCoversEveryJobEnd records the end of maxRunningJobs jobs whose
// output was dropped, as a supervisor does on a tight disk: Reclaim, an
// output_dropped event, the terminal transition, one at a time. Each end
// must fit the reserve many times over, and all of them together must fit
// it: what the WAL holds at most plus what the database file grew by.
func TestReserveCoversEveryJobEnd(t *testing.T) {
	d := openDB(t)
	ctx := context.Background()
	// A MinFree larger than any disk makes every disk tight.
	a := newAppender(t, d, AppenderOptions{MinFree: 1 << 50})
	ids := make([]string, maxRunningJobs)
	for i := range ids {
		ids[i] = newJob(t, d, 64<<20)
		if _, err := d.Transition(ctx, ids[i], db.Transition{To: vocab.StatusRunning, PID: 100000 + i, PGID: 100000 + i, PIDStart: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if !a.Reclaim(ctx) {
		t.Fatal("Reclaim: the disk is not tight")
	}
	dbBefore := fileSize(d.Path)
	var worst int64
	for _, id := range ids {
		a.Reclaim(ctx)
		if w := fileSize(d.Path + "-wal"); w != 0 {
			t.Fatalf("after Reclaim the WAL holds %d bytes", w)
		}
		detail, _ := json.Marshal(map[string]any{"bytes": 1 << 30, "error": "disk full: 1.9 MiB free on the database's file system, 2.0 MiB kept for status changes"})
		if _, err := d.AddEvent(ctx, db.Event{JobID: id, Scope: "default", Kind: "output_dropped", Detail: detail}); err != nil {
			t.Fatal(err)
		}
		code := 0
		if _, err := d.Transition(ctx, id, db.Transition{To: vocab.StatusDone, ExitCode: &code, Runtime: time.Second,
			Detail: map[string]any{"dropped_bytes": 1 << 30},
			Output: &db.OutputTotals{Bytes: 1 << 40, Lines: 1 << 30, Dropped: 1 << 30}}); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, fileSize(d.Path+"-wal"))
	}
	a.Reclaim(ctx)
	growth := fileSize(d.Path) - dbBefore
	if worst > DefaultMinFree/16 || growth+worst > DefaultMinFree {
		t.Fatalf("one end took up to %d bytes of WAL, %d ends grew the database by %d; the reserve is %d",
			worst, maxRunningJobs, growth, DefaultMinFree)
	}
	t.Logf("one end takes at most %d KiB of WAL; %d ends grew the database file by %d KiB; reserve %d KiB",
		worst>>10, maxRunningJobs, growth>>10, DefaultMinFree>>10)
}

// TestWALKeepsRoomForItsCopy floods a 16 MiB file system while a reader
// keeps every checkpoint from copying the WAL, so that the WAL grows as
// far as the appender lets it. When the reader is gone and some space
// returns, the WAL must still fit into the database file: output written
// then is stored, and the WAL gives its space back. A WAL allowed to take
// the room of its own copy never could be copied, and output stayed
// dropped for good.
func TestWALKeepsRoomForItsCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) // after the appender's close, registered later
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dropped := map[string]int64{}
	a := NewAppender(d, AppenderOptions{MaxBatchBytes: 4 << 20, RetryFor: 50 * time.Millisecond,
		OnDropped: func(id string, n int64, _ error) { mu.Lock(); dropped[id] += n; mu.Unlock() }})
	droppedOf := func(id string) int64 { mu.Lock(); defer mu.Unlock(); return dropped[id] }
	a.Open()
	defer a.Close()

	// The reader's snapshot predates the flood: no checkpoint can copy
	// any of it while the reader lives.
	reader, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	flood := newJob(t, d, 0)
	track(t, a, flood, 0)
	line := randomOutput(t, 64<<10) // stored as is: compression must not make it fit
	for i := 0; i < 20<<20/len(line); i++ {
		if err := a.Write(flood, Stdout, line); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Logf("flush of the flood: %v", err)
	}
	if droppedOf(flood) == 0 {
		t.Fatal("nothing dropped on a 16 MiB disk")
	}
	t.Logf("flood: %d KiB of 20 MiB dropped, WAL %d KiB", droppedOf(flood)>>10, fileSize(d.Path+"-wal")>>10)
	if _, err := reader.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	reader.Close()
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}

	// Space returned: the WAL is copied into the database file (whose
	// size then covers every page), and new output fits.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.CheckpointSoon()
		a.Reclaim(ctx)
		var pages int64
		if err := d.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			t.Fatal(err)
		}
		if pages*4096 <= fileSize(d.Path) {
			break
		}
		if time.Now().After(deadline) {
			free, _ := freeBytes(d.Path)
			t.Fatalf("the WAL was never copied after space returned: WAL %d KiB, database %d KiB of %d KiB, %d KiB free",
				fileSize(d.Path+"-wal")>>10, fileSize(d.Path)>>10, pages*4, free>>10)
		}
		time.Sleep(20 * time.Millisecond)
	}
	later := newJob(t, d, 0)
	track(t, a, later, 0)
	if err := a.Write(later, Stdout, line); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("flush after space returned: %v", err)
	}
	var stored int64
	if err := d.QueryRowContext(ctx, "SELECT coalesce(sum("+db.ChunkSize+"), 0) FROM chunks WHERE job_id = ?", later).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if droppedOf(later) != 0 || stored != int64(len(line)) {
		t.Fatalf("after space returned: %d bytes dropped, %d stored, want %d stored", droppedOf(later), stored, len(line))
	}
}
