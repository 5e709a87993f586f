package logs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
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
		if _, err := d.Transition(ctx, ids[i], db.Transition{To: db.StatusRunning, PID: 100000 + i, PGID: 100000 + i, PIDStart: 1}); err != nil {
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
		if _, err := d.Transition(ctx, id, db.Transition{To: db.StatusDone, ExitCode: &code, Runtime: time.Second,
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
