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
// tests' unowned children.
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
		eventually(t, 10*time.Second, "the grandchild to be re-parented to the subreaper", func() bool {
			info, err := Inspect(grand)
			return err == nil && info.PPID == os.Getpid()
		})
		inW.Close() // the grandchild exits at EOF
		eventually(t, 10*time.Second, "the orphan's zombie to disappear", func() bool {
			_, err := Inspect(grand)
			return errors.Is(err, ErrNoProcess)
		})
		mu.Lock()
		ws, ok := reaped[grand]
		mu.Unlock()
		if !ok || ws.ExitStatus() != 3 {
			t.Errorf("OnReap saw %v (%v), want exit status 3", ws, ok)
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
			eventually(t, 10*time.Second, "the child to exit", func() bool { return state(pid) == 'Z' })
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
