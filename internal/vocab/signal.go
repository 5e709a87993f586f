//go:build linux || darwin

package vocab

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// signalNames maps the names ParseSignal accepts (without "SIG") to
// signals. The numbers come from package syscall, so "USR1" is 10 on Linux
// and 30 on darwin.
var signalNames = map[string]syscall.Signal{
	"HUP":    syscall.SIGHUP,
	"INT":    syscall.SIGINT,
	"QUIT":   syscall.SIGQUIT,
	"ILL":    syscall.SIGILL,
	"TRAP":   syscall.SIGTRAP,
	"ABRT":   syscall.SIGABRT,
	"IOT":    syscall.SIGABRT,
	"BUS":    syscall.SIGBUS,
	"FPE":    syscall.SIGFPE,
	"KILL":   syscall.SIGKILL,
	"USR1":   syscall.SIGUSR1,
	"SEGV":   syscall.SIGSEGV,
	"USR2":   syscall.SIGUSR2,
	"PIPE":   syscall.SIGPIPE,
	"ALRM":   syscall.SIGALRM,
	"TERM":   syscall.SIGTERM,
	"CHLD":   syscall.SIGCHLD,
	"CLD":    syscall.SIGCHLD,
	"CONT":   syscall.SIGCONT,
	"STOP":   syscall.SIGSTOP,
	"TSTP":   syscall.SIGTSTP,
	"TTIN":   syscall.SIGTTIN,
	"TTOU":   syscall.SIGTTOU,
	"URG":    syscall.SIGURG,
	"XCPU":   syscall.SIGXCPU,
	"XFSZ":   syscall.SIGXFSZ,
	"VTALRM": syscall.SIGVTALRM,
	"PROF":   syscall.SIGPROF,
	"WINCH":  syscall.SIGWINCH,
	"IO":     syscall.SIGIO,
	"SYS":    syscall.SIGSYS,
}

// canonicalNames picks one name per signal where there are aliases.
var canonicalNames = func() map[syscall.Signal]string {
	out := make(map[syscall.Signal]string, len(signalNames))
	for name, sig := range signalNames {
		switch name {
		case "IOT", "CLD":
			continue
		}
		out[sig] = "SIG" + name
	}
	return out
}()

// ErrUnknownSignal is wrapped by ParseSignal's error for a name or number
// that is not a signal.
var ErrUnknownSignal = errors.New("unknown signal")

// ParseSignal turns a signal name or number into a signal. Names are case
// insensitive, with or without the SIG prefix ("TERM", "SIGTERM", "term");
// numbers are decimal ("15") and must be a valid signal on this system.
// Signal 0, which only probes for a process, is refused.
func ParseSignal(name string) (syscall.Signal, error) {
	s := strings.ToUpper(strings.TrimSpace(name))
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxSignal {
			return 0, fmt.Errorf("parse signal %q: %w (numbers run from 1 to %d)", name, ErrUnknownSignal, maxSignal)
		}
		return syscall.Signal(n), nil
	}
	if sig, ok := signalNames[strings.TrimPrefix(s, "SIG")]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("parse signal %q: %w (use a name such as TERM, INT, HUP, KILL, STOP, CONT, USR1, or a number)", name, ErrUnknownSignal)
}

// SignalName returns the canonical name of sig with its SIG prefix
// ("SIGTERM"), or its decimal number for a signal without a name (real-time
// signals). ParseSignal accepts what it returns.
func SignalName(sig syscall.Signal) string {
	if name, ok := canonicalNames[sig]; ok {
		return name
	}
	return strconv.Itoa(int(sig))
}
