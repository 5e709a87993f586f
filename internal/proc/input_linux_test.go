package proc

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

func TestWaitingForInput(t *testing.T) {
	j := startJob(t, helperCmd("read-stdin"))
	j.line(t)
	eventually(t, patience, "the helper to block reading stdin", func() bool {
		return WaitingForInput(j.target.PID, j.inode, j.target)
	})
	if WaitingForInput(j.target.PID, j.inode+1, j.target) {
		t.Error("WaitingForInput on another pipe's inode = true")
	}
	if _, err := j.stdin.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := j.line(t), `got "hello\n"`; got != want {
		t.Errorf("helper said %q, want %q", got, want)
	}
	eventually(t, patience, "input-wait to end", func() bool {
		return !WaitingForInput(j.target.PID, j.inode, j.target)
	})
}

func TestNotWaitingForInput(t *testing.T) {
	j := startJob(t, helperCmd("sleep"))
	j.line(t)
	eventually(t, patience, "the helper to sleep", func() bool { return state(j.target.PID) == 'S' })
	if WaitingForInput(j.target.PID, j.inode, j.target) {
		t.Error("WaitingForInput(sleeping helper) = true")
	}
}

// TestWaitingForInputRealPrograms checks the detection against the readers
// it exists for, and against look-alikes that sleep in a pipe read on some
// other pipe or do not read at all.
func TestWaitingForInputRealPrograms(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want bool
	}{
		{"sh read", []string{"sh", "-c", "read x"}, true},
		{"cat", []string{"cat"}, true},
		{"sh in a pipeline", []string{"sh", "-c", "cat | cat"}, true},
		{"sleep", []string{"sleep", "30"}, false},
		// The shell sleeps in a pipe read, on the command
		// substitution's pipe, with fd 0 on the job's stdin: a wait
		// channel alone would call that waiting for input.
		{"command substitution", []string{"sh", "-c", "x=$(sleep 30)"}, false},
		{"python3 input", []string{"python3", "-c", "input()"}, true},
		{"python3 select", []string{"python3", "-c", "import select,sys; select.select([sys.stdin],[],[])"}, true},
		{"python3 poll", []string{"python3", "-c", "import select,sys; p=select.poll(); p.register(0, select.POLLIN); p.poll()"}, true},
		{"python3 epoll", []string{"python3", "-c", "import selectors,sys; s=selectors.EpollSelector(); s.register(sys.stdin, selectors.EVENT_READ); s.select()"}, true},
		{"python3 sleeps", []string{"python3", "-c", "import time; time.sleep(30)"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Side by side (a job each; no reaper runs during this test):
			// python3 alone takes seconds to start on a loaded machine.
			t.Parallel()
			if _, err := exec.LookPath(tt.argv[0]); err != nil {
				t.Skipf("%s not installed", tt.argv[0])
			}
			j := startJob(t, exec.Command(tt.argv[0], tt.argv[1:]...))
			if tt.want {
				eventually(t, time.Minute, "input-wait", func() bool {
					return WaitingForInput(j.target.PID, j.inode, j.target)
				})
				return
			}
			// Every process of the job asleep: whatever it waits for,
			// it is waiting now.
			eventually(t, time.Minute, "the job to settle", func() bool {
				return allSleeping(j.target)
			})
			if WaitingForInput(j.target.PID, j.inode, j.target) {
				t.Error("WaitingForInput = true")
			}
		})
	}
}

// allSleeping reports whether every process of t is asleep in the kernel.
func allSleeping(t Target) bool {
	live, _, err := jobProcs(t)
	if err != nil || len(live) == 0 {
		return false
	}
	for pid := range live {
		if state(pid) != 'S' {
			return false
		}
	}
	return true
}

// TestWaitingForInputWchanFallback checks the path taken where
// /proc/PID/task/TID/syscall cannot be read.
func TestWaitingForInputWchanFallback(t *testing.T) {
	old := syscallFile
	syscallFile = "no-such-file"
	t.Cleanup(func() { syscallFile = old })

	j := startJob(t, exec.Command("sh", "-c", "read x"))
	eventually(t, patience, "input-wait seen through the wait channel", func() bool {
		return WaitingForInput(j.target.PID, j.inode, j.target)
	})
	s := startJob(t, exec.Command("sleep", "30"))
	eventually(t, patience, "sleep to sleep", func() bool { return state(s.target.PID) == 'S' })
	if WaitingForInput(s.target.PID, s.inode, s.target) {
		t.Error("WaitingForInput(sleep) through the wait channel = true")
	}
}

// groupDescendants finds the job's processes below its main one that stay
// in its group, from the children files alone, and leaves out one that
// left the group.
func TestGroupDescendants(t *testing.T) {
	j := startJob(t, helperCmd("tree"))
	var same, away int
	if _, err := fmt.Sscan(j.line(t), &same, &away); err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for _, info := range groupDescendants(j.target.PID, j.target.PGID) {
		got[info.PID] = true
	}
	if !got[same] || got[away] || got[j.target.PID] || len(got) != 1 {
		t.Errorf("groupDescendants = %v, want only %d (the grandchild in the group; %d left it)", got, same, away)
	}
}
