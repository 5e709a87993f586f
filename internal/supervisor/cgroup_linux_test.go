package supervisor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
)

// A job runs in its own cgroup where the system offers one; the cgroup is
// recorded with its start, goes when the job ends with nothing left in
// it, and an empty one left by a finished job goes at the janitor's next
// round while a running job's stays.
func TestJobCgroup(t *testing.T) {
	if cg, err := proc.NewCgroup("jobs-supervisor-probe-" + db.NewID()); err != nil {
		t.Skipf("no cgroup can be made here: %v", err)
	} else {
		cg.Close()
		_ = proc.RemoveCgroup(cg.Path)
	}
	s := startSupervisor(t, Config{})
	ctx := context.Background()
	running := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: helperArgv(t, "sleep", "30")}})
	path := control.CgroupOf(ctx, s.db, running.ID)
	if path == "" {
		t.Fatalf("no cgroup recorded for job %s", running.ID)
	}
	if pids, err := proc.CgroupProcs(path); err != nil || !containsInt(pids, running.PID) {
		t.Fatalf("cgroup %s holds %v, %v; want the job's process %d", path, pids, err, running.PID)
	}
	done := start(t, s, protocol.StartRequest{Job: db.NewJob{Argv: []string{"true"}}})
	donePath := control.CgroupOf(ctx, s.db, done.ID)
	waitDone(t, s.db, done.ID, 30*time.Second)
	eventually(t, 30*time.Second, "the finished job's cgroup to go", func() bool {
		_, err := os.Stat(donePath)
		return os.IsNotExist(err)
	})

	// As a leftover that ended on its own leaves it: empty, job finished.
	if err := os.Mkdir(donePath, 0o755); err != nil {
		t.Fatal(err)
	}
	s.janitor.dropEmptyCgroups(ctx)
	if _, err := os.Stat(donePath); !os.IsNotExist(err) {
		t.Errorf("the finished job's empty cgroup stayed: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the running job's cgroup went: %v", err)
	}
	if _, err := s.Kill(ctx, running.ID, 0); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s.db, running.ID, 30*time.Second)
	eventually(t, 30*time.Second, "the killed job's cgroup to go", func() bool {
		_, err := os.Stat(path)
		return os.IsNotExist(err)
	})
}
