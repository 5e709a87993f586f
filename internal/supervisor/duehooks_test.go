package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/sweep"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
)

// TestDueHooksRunOnceByNextSupervisors: the on_exit hooks of jobs that
// ended while no supervisor ran (one its supervisor's death leaves
// running, one a read marked lost, one whose supervisor died between
// recording its end and claiming its hook) are run by the supervisors that
// start next, each exactly once though two start at once on two
// connections. A lost job that ended before the event retention is not run
// again (its hook event may have been deleted).
func TestDueHooksRunOnceByNextSupervisors(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		dueHooksRound(t, round)
		if t.Failed() {
			return
		}
	}
}

func dueHooksRound(t *testing.T, round int) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dead := db.Supervisor{ID: db.NewID(), PID: 1 << 22, Kind: "detached",
		LockPath: filepath.Join(dir, "dead.lock"), SocketPath: filepath.Join(dir, "dead.sock")}
	if err := os.WriteFile(dead.LockPath, nil, 0o600); err != nil { // a lock nobody holds
		t.Fatal(err)
	}
	if err := d.CreateSupervisor(ctx, dead); err != nil {
		t.Fatal(err)
	}
	marker := func(name string) string { return filepath.Join(dir, name+".hook") }
	newJob := func(name string) db.Job {
		j, err := d.CreateJob(ctx, db.NewJob{Scope: "default", Command: "true", Cwd: dir,
			SupervisorID: dead.ID, Mode: "pipe", Stdin: "pipe", TTL: time.Hour,
			OnExit: "echo ran >> " + textclean.ShellQuote(marker(name))}, db.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	read := newJob("read")   // marked lost by a read
	ended := newJob("ended") // ended, its hook never claimed
	old := newJob("old")     // lost before the event retention
	if _, err := d.Transition(ctx, ended.ID, db.Transition{To: vocab.StatusFailed, Reason: "exec failed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Transition(ctx, old.ID, db.Transition{To: vocab.StatusLost, Reason: "supervisor died"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, `UPDATE jobs SET ended_at = ? WHERE id = ?`,
		db.FormatTime(time.Now().Add(-DefaultEventRetention-time.Hour)), old.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := sweep.Lost(ctx, d, nil); err != nil || n != 1 {
		t.Fatalf("the read's sweep marked %d (%v), want 1", n, err)
	}
	left := newJob("left") // still starting: the next supervisors' sweep marks it lost

	// Two supervisors start at once, each on its own connections, as two
	// processes would.
	run := runtimeDir(t)
	var wg sync.WaitGroup
	sups := make([]*Supervisor, 2)
	gate := make(chan struct{})
	for i := range sups {
		dd, err := db.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Close()
		s, err := New(Config{DB: dd, RuntimeDir: run, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		sups[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			if err := s.Open(ctx); err != nil {
				t.Errorf("open supervisor %d: %v", i, err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	finished := func(id string) int {
		evs, err := d.Events(ctx, db.EventFilter{AllScopes: true, JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Kind == "hook" && strings.Contains(string(e.Detail), `"finished"`) {
				n++
			}
		}
		return n
	}
	due := map[string]db.Job{"left": left, "read": read, "ended": ended}
	eventually(t, 20*time.Second, "the due hooks to finish", func() bool {
		for _, j := range due {
			if finished(j.ID) == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range sups {
		if err := s.Close(); err != nil { // waits for its hooks
			t.Error(err)
		}
	}
	for name, j := range due {
		evs, err := d.Events(ctx, db.EventFilter{AllScopes: true, JobID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		hooks := 0
		for _, e := range evs {
			if e.Kind == "hook" {
				hooks++
			}
		}
		b, _ := os.ReadFile(marker(name))
		if string(b) != "ran\n" || hooks != 2 {
			t.Errorf("round %d, job %s: hook wrote %q with %d hook events; want one run (started, finished)", round, name, b, hooks)
		}
	}
	if _, err := os.Stat(marker("old")); err == nil {
		t.Errorf("round %d: the hook of a job lost before the event retention ran again", round)
	}
}
