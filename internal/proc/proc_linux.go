package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxRSSPerKB converts ru_maxrss to KiB: Linux already reports KiB.
const maxRSSPerKB = 1

// procRoot is where the proc filesystem is mounted.
const procRoot = "/proc"

// errESRCH is what a read of /proc/PID/... returns when the process goes
// away in the middle of the read.
var errESRCH = syscall.ESRCH

// ErrNoProcess is returned by Inspect and StartTime when no process has the
// pid.
var ErrNoProcess = errors.New("no such process")

// StartTime returns the start time of pid: /proc/PID/stat field 22, in clock
// ticks since boot. Together with the pid it identifies one process for its
// whole life.
func StartTime(pid int) (int64, error) {
	info, err := Inspect(pid)
	if err != nil {
		return 0, err
	}
	return info.StartTime, nil
}

// Inspect reads pid's identity from /proc/PID/stat. It returns an error
// wrapping ErrNoProcess when the process does not exist (a zombie still
// exists; see Info.Dead).
func Inspect(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, ErrNoProcess)
	}
	var buf [1024]byte
	b, err := readSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errESRCH) {
			return Info{}, fmt.Errorf("inspect process %d: %w", pid, ErrNoProcess)
		}
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, err)
	}
	info, err := parseStat(b)
	if err != nil {
		return Info{}, fmt.Errorf("inspect process %d: %w", pid, err)
	}
	return info, nil
}

// readSmall reads a small /proc file into buf with three system calls.
// os.ReadFile spends five (it stats the file to size its buffer and reads
// until EOF) plus an os.File's bookkeeping, and a process scan does this
// for every process on the machine.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	n, err := syscall.Read(fd, buf)
	for errors.Is(err, syscall.EINTR) {
		n, err = syscall.Read(fd, buf)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if n == len(buf) {
		// Longer than expected: fall back to reading it whole.
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// parseStat parses the contents of /proc/PID/stat. The command name sits in
// parentheses and may itself contain spaces and parentheses ("a) (b"), so it
// runs from the first '(' to the last ')'; the numeric fields follow.
func parseStat(b []byte) (Info, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Info{}, errors.New("parse stat: no command name")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Info{}, fmt.Errorf("parse stat: pid: %w", err)
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(string(b[closing+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return Info{}, errors.New("parse stat: too few fields")
	}
	var nums [4]int
	for i, f := range fields[1:4] { // ppid, pgrp, session
		if nums[i], err = strconv.Atoi(f); err != nil {
			return Info{}, fmt.Errorf("parse stat: field %d: %w", i+4, err)
		}
	}
	start, err := strconv.ParseInt(fields[22-3], 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("parse stat: start time: %w", err)
	}
	flags, err := strconv.ParseUint(fields[9-3], 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("parse stat: flags: %w", err)
	}
	return Info{
		PID:       pid,
		PPID:      nums[0],
		PGID:      nums[1],
		SID:       nums[2],
		State:     fields[0][0],
		StartTime: start,
		Comm:      string(b[open+1 : closing]),
		Exiting:   flags&pfExiting != 0,
	}, nil
}

// pfExiting is the kernel's PF_EXITING task flag: the task is in do_exit.
const pfExiting = 0x4

// pids lists the processes (thread-group leaders) in /proc.
func pids() ([]int, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// FindByEnv returns the live processes whose environment holds exactly the
// entry key=value. It finds a job's processes that left its process group
// (setsid, double fork), because every child of a job inherits JOBS_ID.
// Processes whose environment cannot be read (another user's) are skipped.
// The environment read is the one the process was started with.
func FindByEnv(key, value string) ([]Info, error) {
	if key == "" {
		return nil, errors.New("find processes by environment: empty key")
	}
	found, _, err := scanSince(func(Info) bool { return false }, key, value, 0, "")
	return found, err
}

// FindByArgs returns the live processes whose command line holds first
// and, after it, the arguments of rest side by side (for example
// "tmux-pipe", then "--job", id). Processes whose command line cannot be
// read are skipped.
func FindByArgs(first string, rest ...string) ([]Info, error) {
	all, err := pids()
	if err != nil {
		return nil, err
	}
	var found []Info
	for _, pid := range all {
		b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !argsHold(strings.Split(string(b), "\x00"), first, rest) {
			continue
		}
		if info, err := Inspect(pid); err == nil && !info.Dead() {
			found = append(found, info)
		}
	}
	return found, nil
}

// argsHold reports whether argv holds first and, after it, rest side by
// side.
func argsHold(argv []string, first string, rest []string) bool {
	i := slices.Index(argv, first)
	if i < 0 {
		return false
	}
	for j := i + 1; j+len(rest) <= len(argv); j++ {
		if slices.Equal(argv[j:j+len(rest)], rest) {
			return true
		}
	}
	return false
}

// scan walks /proc once and returns every process for which match is true.
func scan(match func(Info) bool, key, value string) ([]Info, error) {
	found, _, err := scanSince(match, key, value, 0, "")
	return found, err
}

// scanSince walks /proc once and returns every process for which match is
// true or, when key is set, whose environment holds key=value; tagged holds
// the pids of the latter. Processes that vanish during the walk are skipped.
//
// Only processes started at or after minStart (clock ticks since boot) have
// their environment read. A process carrying a job's JOBS_ID inherited it
// from the job, so it cannot be older than the job's main process; skipping
// the environ files of older processes (most of a machine's) makes the scan
// several times cheaper. With notKey, a process that also holds
// notKey=value is not tagged (see Target.NotEnvKey).
func scanSince(match func(Info) bool, key, value string, minStart int64, notKey string) (found []Info, tagged map[int]bool, err error) {
	all, err := pids()
	if err != nil {
		return nil, nil, err
	}
	var entry, notEntry []byte
	if key != "" {
		entry = []byte("\x00" + key + "=" + value + "\x00")
		if notKey != "" {
			notEntry = []byte("\x00" + notKey + "=" + value + "\x00")
		}
	}
	for _, pid := range all {
		info, err := Inspect(pid)
		if err != nil {
			continue
		}
		tag := entry != nil && !info.Dead() && info.StartTime >= minStart && hasEnv(pid, entry) &&
			(notEntry == nil || !hasEnv(pid, notEntry))
		if tag {
			if tagged == nil {
				tagged = map[int]bool{}
			}
			tagged[pid] = true
		}
		if tag || match(info) {
			found = append(found, info)
		}
	}
	return found, tagged, nil
}

// hasEnv reports whether /proc/PID/environ holds entry, given as
// "\x00KEY=VALUE\x00" so that only a whole entry matches.
func hasEnv(pid int, entry []byte) bool {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return false
	}
	// Entries are NUL-terminated; framing the block with NULs on both
	// sides lets the first entry match like any other.
	framed := make([]byte, 0, len(b)+2)
	framed = append(framed, 0)
	framed = append(framed, b...)
	if b[len(b)-1] != 0 {
		framed = append(framed, 0)
	}
	return bytes.Contains(framed, entry)
}

// signalProcess sends sig to pid only if pid is still the process that
// started at start and has not exited. It opens a pidfd first and checks the
// start time after, so the signal goes either to that very process or, if the
// pid was recycled in between, to the already-dead process the pidfd pins
// (which is a no-op): a reused pid is never hit. It reports whether the
// signal was delivered.
func signalProcess(pid int, start int64, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			// Kernels before 5.3 have no pidfd; the check-then-kill
			// window that remains is microseconds against a pid wrap.
			return checkedKill(pid, start, sig)
		}
		return false, fmt.Errorf("open pidfd %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if !Alive(pid, start) {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("signal process %d: %w", pid, err)
	}
	return true, nil
}

// SpawnerPeakKB is this process's peak resident set size (VmHWM), in KiB;
// 0 when unknown.
//
// A child's ru_maxrss counts the memory of the process it was spawned
// from: Go starts children with vfork (CLONE_VM), so at the child's exec
// the kernel records the mm it leaves, ours, as the child's peak so far
// (exec_mmap: setmax_mm_hiwater_rss). A child whose reported peak is not
// above this value, read once the child has exec'd, may have used any
// amount up to it: its own peak is not known.
func SpawnerPeakKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
