package proc

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxRSSPerKB converts ru_maxrss to KiB: darwin reports bytes.
const maxRSSPerKB = 1024

// ErrNoProcess is returned by Inspect and StartTime when no process has the
// pid.
var ErrNoProcess = errors.New("no such process")

// StartTime returns the start time of pid in microseconds since the epoch
// (kinfo_proc p_starttime). Together with the pid it identifies one process.
func StartTime(pid int) (int64, error) {
	info, err := Inspect(pid)
	if err != nil {
		return 0, err
	}
	return info.StartTime, nil
}

// Inspect reads pid's identity from the kern.proc.pid sysctl.
func Inspect(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, ErrNoProcess)
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, err)
	}
	if int(kp.Proc.P_pid) != pid {
		// The sysctl answers an empty record for a pid that is gone.
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, ErrNoProcess)
	}
	return fromKinfo(kp), nil
}

func fromKinfo(kp *unix.KinfoProc) Info {
	pid := int(kp.Proc.P_pid)
	sid, err := unix.Getsid(pid)
	if err != nil {
		sid = 0
	}
	return Info{
		PID:       pid,
		PPID:      int(kp.Eproc.Ppid),
		PGID:      int(kp.Eproc.Pgid),
		SID:       sid,
		State:     darwinState(kp.Proc.P_stat),
		StartTime: kp.Proc.P_starttime.Sec*1_000_000 + int64(kp.Proc.P_starttime.Usec),
		Comm:      unix.ByteSliceToString(kp.Proc.P_comm[:]),
	}
}

// darwinState maps BSD p_stat values onto Linux state letters.
func darwinState(s int8) byte {
	switch s {
	case 1: // SIDL
		return 'R'
	case 2: // SRUN
		return 'R'
	case 3: // SSLEEP
		return 'S'
	case 4: // SSTOP
		return 'T'
	case 5: // SZOMB
		return 'Z'
	}
	return '?'
}

// FindByEnv is not available on darwin: another process's environment is not
// exposed without parsing kern.procargs2, which this package does not do.
func FindByEnv(key, value string) ([]Info, error) {
	return nil, fmt.Errorf("find processes by environment: %w", errors.ErrUnsupported)
}

// FindByArgs is not available on darwin: another process's arguments are
// not exposed without parsing kern.procargs2, which this package does not
// do.
func FindByArgs(first string, rest ...string) ([]Info, error) {
	return nil, fmt.Errorf("find processes by arguments: %w", errors.ErrUnsupported)
}

// scan lists every process for which match is true. The environment tag
// cannot be read on darwin, so key and value are ignored.
func scan(match func(Info) bool, key, value string) ([]Info, error) {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Info
	for i := range all {
		if info := fromKinfo(&all[i]); match(info) {
			out = append(out, info)
		}
	}
	return out, nil
}

// signalProcess sends sig to pid if it still has start time start.
func signalProcess(pid int, start int64, sig syscall.Signal) (bool, error) {
	return checkedKill(pid, start, sig)
}

// scanSince is scan; the start-time bound only prunes environment reads,
// which darwin does not do.
func scanSince(match func(Info) bool, key, value string, _ int64, _ string) ([]Info, map[int]bool, error) {
	found, err := scan(match, key, value)
	return found, nil, err
}

// SpawnerPeakKB is 0 on darwin: a child's peak there is its own.
func SpawnerPeakKB() int64 { return 0 }
