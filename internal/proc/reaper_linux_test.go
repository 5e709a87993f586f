package proc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReaper makes the test binary a subreaper (it stays one for the rest of
// the run, which only means later orphans end up here as zombies). It is
// not parallel: a Reaper with MinAge 0 would take the status of other
// tests' unowned children that have a process group of their own.
func TestReaper(t *testing.T) {
	if err := SetSubreaper(); err != nil {
		t.Fatal(err)
	}
	r := NewReaper()
	r.MinAge = 0 // only the owned set protects children here
	var mu sync.Mutex
	reaped := map[int]syscall.WaitStatus{}
	r.OnReap = func(pid int, ws syscall.WaitStatus) {
		mu.Lock()
		defer mu.Unlock()
		reaped[pid] = ws
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if err := r.Start(); !errors.Is(err, ErrReaperStarted) {
		t.Errorf("second Start = %v, want ErrReaperStarted", err)
	}

	t.Run("orphan is reaped", func(t *testing.T) {
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer inW.Close()
		cmd := helperCmd("orphan")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as every job is
		cmd.Stdin = inR
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.StartCmd(cmd); err != nil {
			t.Fatal(err)
		}
		inR.Close()
		buf := make([]byte, 64)
		n, _ := out.Read(buf)
		grand, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
		if err != nil {
			t.Fatalf("orphan helper printed %q", buf[:n])
		}
		// The middle process's own status reaches its waiter.
		if err := cmd.Wait(); err != nil {
			t.Fatalf("Wait for the owned middle process: %v", err)
		}
		r.Disown(cmd.Process.Pid)
		eventually(t, patience, "the grandchild to be re-parented to the subreaper", func() bool {
			info, err := Inspect(grand)
			return err == nil && info.PPID == os.Getpid()
		})
		inW.Close() // the grandchild exits at EOF
		// OnReap runs after the reap, so the zombie may be gone a while
		// before the callback has its status: wait for the callback.
		var ws syscall.WaitStatus
		eventually(t, patience, "OnReap to report the orphan", func() bool {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			ws, ok = reaped[grand]
			return ok
		})
		if ws.ExitStatus() != 3 {
			t.Errorf("OnReap saw %v, want exit status 3", ws)
		}
		if _, err := Inspect(grand); !errors.Is(err, ErrNoProcess) {
			t.Errorf("the orphan %d is still there after OnReap: %v", grand, err)
		}
	})

	t.Run("owned children keep their status", func(t *testing.T) {
		for i := range 10 {
			cmd := helperCmd("exit", "7")
			if err := r.StartCmd(cmd); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			// Let it sit as a zombie through SIGCHLD and an explicit
			// pass before Wait looks.
			eventually(t, patience, "the child to exit", func() bool { return state(pid) == 'Z' })
			r.ReapNow()
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Fatalf("run %d: Wait = %v, want exit status 7", i, err)
			}
			r.Disown(pid)
		}
	})
}

// TestReaperMinAgeSparesUnowned runs children that the Reaper knows nothing
// about, waited for at once as exec.Cmd.Run does, and checks their status
// still arrives.
func TestReaperMinAgeSparesUnowned(t *testing.T) {
	if err := SetSubreaper(); err != nil {
		t.Fatal(err)
	}
	r := NewReaper()
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	for i := range 10 {
		err := helperCmd("exit", "5").Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Fatalf("run %d: Run = %v, want exit status 5", i, err)
		}
	}
	r.Stop()
	r.Stop() // idempotent
}

// TestReaperSparesItsOwnGroup leaves children of this process's own group,
// which the Reaper knows nothing about, as zombies for longer than MinAge
// while it reaps (MinAge 0, and passes forced with ReapNow), then waits for
// them: their status is still theirs, as for a program that embeds a
// supervisor and waits for its own children when it likes. A child in a
// group of its own with the same history is reaped: that is what an
// orphan of a job looks like.
func TestReaperSparesItsOwnGroup(t *testing.T) {
	if err := SetSubreaper(); err != nil {
		t.Fatal(err)
	}
	r := NewReaper()
	r.MinAge = 0
	reaped := make(chan int, 10)
	r.OnReap = func(pid int, _ syscall.WaitStatus) { reaped <- pid }
	mine := helperCmd("exit", "7")
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	orphanLike := helperCmd("exit", "3")
	orphanLike.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphanLike.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{mine, orphanLike} {
		deadline := time.Now().Add(time.Minute)
		for {
			info, err := Inspect(c.Process.Pid)
			if err == nil && info.State == 'Z' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d did not become a zombie: %+v, %v", c.Process.Pid, info, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Passes until the one in a group of its own is taken (a pass can
	// miss a child that is exiting); ours must never be.
	deadline := time.Now().Add(time.Minute)
	for took := false; !took; {
		r.ReapNow()
		for drained := false; !drained; {
			select {
			case pid := <-reaped:
				if pid != orphanLike.Process.Pid {
					t.Fatalf("the Reaper took pid %d, a child of our own group (want only %d)", pid, orphanLike.Process.Pid)
				}
				took = true
			default:
				drained = true
			}
		}
		if !took && time.Now().After(deadline) {
			t.Fatalf("the Reaper left the zombie in a group of its own (pid %d)", orphanLike.Process.Pid)
		}
	}
	for range 5 {
		r.ReapNow()
		select {
		case pid := <-reaped:
			t.Fatalf("the Reaper took pid %d, a child of our own group", pid)
		default:
		}
	}
	err := mine.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("Wait for the child of our own group = %v, want exit status 7", err)
	}
}
