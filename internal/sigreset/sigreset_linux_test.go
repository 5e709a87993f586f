package sigreset

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as a launcher that blocks and ignores signals
// (`launch`) and as the program it launches (`wrapped`), which starts
// commands through Wrap.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "launch":
			runtime.LockOSThread()
			var set unix.Sigset_t
			set.Val[0] = 1<<(syscall.SIGUSR2-1) | 1<<(syscall.SIGPIPE-1) | 1<<(syscall.SIGTERM-1)
			unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil)
			signal.Ignore(syscall.SIGTTOU, syscall.SIGHUP)
			err := syscall.Exec("/proc/self/exe", append([]string{os.Args[0], "wrapped"}, os.Args[2:]...), os.Environ())
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		case "wrapped":
			os.Exit(wrapped(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// wrapped runs argv through Wrap and prints what it printed, or the start
// error.
func wrapped(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	if filepath.IsAbs(argv[0]) {
		cmd.Err = nil
	}
	started, err := Wrap(cmd)
	if err != nil {
		fmt.Println("wrap:", err)
		return 1
	}
	cmd.Stdout = os.Stdout
	err = cmd.Start()
	if serr := started(); err == nil && serr != nil {
		cmd.Wait()
		var pe *os.PathError
		fmt.Println("start:", serr, errors.As(serr, &pe))
		return 0
	}
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	cmd.Wait()
	return 0
}

func launch(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := exec.Command(os.Args[0], append([]string{"launch"}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("launch %v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// TestWrapResetsMaskAndDispositions: a program launched with signals
// blocked and ignored starts its children, through Wrap, with none.
func TestWrapResetsMaskAndDispositions(t *testing.T) {
	out := launch(t, "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status")
	if !strings.Contains(out, "SigBlk:\t0000000000000000") || !strings.Contains(out, "SigIgn:\t0000000000000000") {
		t.Errorf("the child's signal state:\n%s\nwant nothing blocked or ignored", out)
	}
	// The marker of the shim does not reach the command.
	if out := launch(t, "env"); strings.Contains(out, shimEnv) {
		t.Errorf("the command's environment names %s:\n%s", shimEnv, out)
	}
}

// TestWrapReportsExecFailure: the shim's failure to exec the command is
// the start error cmd.Start would have given.
func TestWrapReportsExecFailure(t *testing.T) {
	f := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := launch(t, f)
	if want := "start: fork/exec " + f + ": permission denied true"; strings.TrimSpace(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestWrapWithoutInheritance: a process with nothing blocked or ignored
// starts the command directly.
func TestWrapWithoutInheritance(t *testing.T) {
	if b, i := Inherited(); b != 0 || i != 0 {
		t.Skipf("this test process runs with signals blocked (%x) or ignored (%x)", b, i)
	}
	cmd := exec.Command("true")
	if _, err := Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	if cmd.Args[0] != "true" || len(cmd.ExtraFiles) != 0 {
		t.Errorf("Wrap changed a command it need not: %v", cmd.Args)
	}
}
