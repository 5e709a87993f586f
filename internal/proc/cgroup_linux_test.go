package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A job's own cgroup proves membership where nothing else does: a
// grandchild that left the group and the session, with no tag to scan for.
// A directory that is not a cgroup proves nothing, whatever its files say.
func TestCgroupProvesMembership(t *testing.T) {
	cg, err := NewCgroup("jobs-proc-test-" + newTag(t))
	if err != nil {
		t.Skipf("no cgroup can be made here: %v", err)
	}
	t.Cleanup(func() { _ = RemoveCgroup(cg.Path) })
	j := startJobWith(t, helperCmd("setsid-grandchild"), func(c *exec.Cmd) error {
		c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, cg.FD
		return c.Start()
	})
	cg.Close()
	var away int
	for pid := range j.pids(t) {
		away = pid
	}
	untagged := j.target
	untagged.EnvKey = "" // as after env -i: only the cgroup can tell
	if m, err := Members(untagged); err != nil || slices.Contains(m, away) {
		t.Fatalf("without the cgroup, members = %v, %v; the setsid'd grandchild %d must not be proven", m, err, away)
	}

	forged := untagged
	forged.Cgroup = t.TempDir()
	if err := os.WriteFile(filepath.Join(forged.Cgroup, "cgroup.procs"), []byte(strconv.Itoa(away)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m, _ := Members(forged); slices.Contains(m, away) {
		t.Errorf("a plain directory naming %d proved it: members = %v", away, m)
	}

	inCgroup := untagged
	inCgroup.Cgroup = cg.Path
	if m, err := Members(inCgroup); err != nil || !slices.Contains(m, away) {
		t.Fatalf("with the cgroup, members = %v, %v; want the grandchild %d", m, err, away)
	}
	res, err := KillTree(context.Background(), inCgroup, time.Second)
	if err != nil || !slices.Contains(res.Signalled, away) || len(res.Survivors) != 0 {
		t.Errorf("KillTree = %+v, %v; want the grandchild %d signalled and none left", res, err, away)
	}
}

// A lost job's group proves nothing once its main process is gone (its id
// may have been reused before the job was marked lost); the tag still
// does.
func TestEndUnknownGroupWithoutMain(t *testing.T) {
	j := startJob(t, helperCmd("fork-grandchild"))
	var grandchild int
	for pid := range j.pids(t) {
		grandchild = pid
	}
	if err := syscall.Kill(j.target.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Reaped: a zombie still holds its pid, and so its group's id.
	_ = j.cmd.Wait()

	for _, c := range []struct {
		name       string
		endUnknown bool
		tag        bool
		want       bool
	}{
		{name: "running, untagged", want: true},
		{name: "lost, untagged", endUnknown: true, want: false},
		{name: "lost, tagged", endUnknown: true, tag: true, want: true},
	} {
		tg := j.target
		tg.EndUnknown = c.endUnknown
		if !c.tag {
			tg.EnvKey = ""
		}
		m, err := Members(tg)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(m, grandchild); got != c.want {
			t.Errorf("%s: members %v, grandchild %d proven %t, want %t", c.name, m, grandchild, got, c.want)
		}
	}
}

// The mount point found once is taken again only while it is still a
// cgroup2 file system: a remembered path that is not one (here "/") sends
// the lookup back to the mount table.
func TestCgroup2MountCached(t *testing.T) {
	want, err := cgroup2Mount()
	if err != nil {
		t.Skipf("no cgroup2 here: %v", err)
	}
	t.Cleanup(func() { lastCgroup2Mount.Store(nil) })
	for range 2 {
		got, err := cgroup2MountCached()
		if err != nil || got != want {
			t.Fatalf("cgroup2MountCached = %q, %v; want %q", got, err, want)
		}
	}
	stale := "/"
	lastCgroup2Mount.Store(&stale)
	if got, err := cgroup2MountCached(); err != nil || got != want {
		t.Fatalf("with a stale path remembered: %q, %v; want %q", got, err, want)
	}
	if p := lastCgroup2Mount.Load(); p == nil || *p != want {
		t.Fatalf("remembered %v after the lookup, want %q", p, want)
	}
}
