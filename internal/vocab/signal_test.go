//go:build linux || darwin

package vocab

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
	}{
		{"TERM", syscall.SIGTERM},
		{"SIGTERM", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{"sigterm", syscall.SIGTERM},
		{" TERM ", syscall.SIGTERM},
		{"15", syscall.SIGTERM},
		{"9", syscall.SIGKILL},
		{"INT", syscall.SIGINT},
		{"HUP", syscall.SIGHUP},
		{"STOP", syscall.SIGSTOP},
		{"CONT", syscall.SIGCONT},
		{"USR1", syscall.SIGUSR1},
		{"usr2", syscall.SIGUSR2},
		{"KILL", syscall.SIGKILL},
		{"QUIT", syscall.SIGQUIT},
		{"WINCH", syscall.SIGWINCH},
		{"SigAlrm", syscall.SIGALRM},
		{"IOT", syscall.SIGABRT},
	}
	for _, tt := range tests {
		got, err := ParseSignal(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "SIG", "FOO", "SIGFOO", "0", "-15", "+15", "999", "1e3", "TERM9", "SIGSIGTERM", "T E R M"} {
		if got, err := ParseSignal(bad); err == nil || !errors.Is(err, ErrUnknownSignal) {
			t.Errorf("ParseSignal(%q) = %v, %v; want ErrUnknownSignal", bad, got, err)
		}
	}
}

func TestSignalName(t *testing.T) {
	tests := []struct {
		in   syscall.Signal
		want string
	}{
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGABRT, "SIGABRT"},
		{syscall.SIGCHLD, "SIGCHLD"},
	}
	for _, tt := range tests {
		if got := SignalName(tt.in); got != tt.want {
			t.Errorf("SignalName(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for n := 1; n <= maxSignal; n++ {
		sig := syscall.Signal(n)
		if got, err := ParseSignal(SignalName(sig)); err != nil || got != sig {
			t.Errorf("ParseSignal(SignalName(%d)) = %v, %v", n, got, err)
		}
	}
}

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"TERM", "sigkill", "15", "0", "", "SIG", "USR1", "64", "65"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			if !errors.Is(err, ErrUnknownSignal) {
				t.Fatalf("ParseSignal(%q) error %v does not wrap ErrUnknownSignal", s, err)
			}
			return
		}
		if sig < 1 || int(sig) > maxSignal {
			t.Fatalf("ParseSignal(%q) = %d, out of range", s, sig)
		}
		if again, err := ParseSignal(SignalName(sig)); err != nil || again != sig {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, sig, SignalName(sig), again, err)
		}
	})
}
