package proc

import (
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// TestTargetProvesMembership checks what proves a process a job's when it
// carries no JOBS_ID: the main process by its start time, a member of the
// group by starting within the job's life while the group's leader is the
// main process, and nothing from another boot.
func TestTargetProvesMembership(t *testing.T) {
	cmd := helperCmd("fork-grandchild")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	gc, err := strconv.Atoi(string(buf[:n-1]))
	if err != nil {
		t.Fatalf("helper printed %q", buf[:n])
	}
	start, err := StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	gcStart, err := StartTime(gc)
	if err != nil {
		t.Fatal(err)
	}
	job := Target{PID: pid, PGID: pid, PIDStart: start, BootID: BootID()}
	for _, c := range []struct {
		name string
		t    func(Target) Target
		want []int
	}{
		{"as recorded", func(t Target) Target { return t }, []int{pid, gc}},
		{"boot not recorded", func(t Target) Target { t.BootID = ""; return t }, []int{pid, gc}},
		{"another boot", func(t Target) Target { t.BootID = "another"; return t }, nil},
		{"earlier start time", func(t Target) Target { t.PIDStart--; return t }, nil},
		{"later start time", func(t Target) Target { t.PIDStart++; return t }, nil},
		{"no start time", func(t Target) Target { t.PIDStart = 0; return t }, nil},
		{"ended before the grandchild started", func(t Target) Target { t.EndTicks = gcStart - 1; return t }, []int{pid}},
		{"ended now", func(t Target) Target { t.EndTicks = Now(); return t }, []int{pid, gc}},
	} {
		got, err := Members(c.t(job))
		if err != nil {
			t.Fatal(err)
		}
		if want := sorted(c.want); !slices.Equal(got, want) {
			t.Errorf("%s: Members = %v, want %v", c.name, got, want)
		}
	}

	// Once the main process is gone, group members still count while the
	// group's leader pid names nothing else.
	syscall.Kill(pid, syscall.SIGKILL)
	cmd.Wait()
	if got, _ := Members(job); !slices.Equal(got, []int{gc}) {
		t.Errorf("after the main process died: Members = %v, want [%d]", got, gc)
	}
	syscall.Kill(gc, syscall.SIGSTOP)
	eventually(t, patience, "the grandchild to stop", func() bool { return state(gc) == 'T' })
	if alive, stopped := Census(job); alive != 1 || !stopped {
		t.Errorf("Census of a stopped grandchild = %d, %t; want 1, true", alive, stopped)
	}
}

func sorted(p []int) []int {
	if p == nil {
		return nil
	}
	out := slices.Clone(p)
	slices.Sort(out)
	return out
}
