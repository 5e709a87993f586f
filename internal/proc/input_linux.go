package proc

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WaitingForInput reports whether a process of the job — pid, or a member of
// t's process group — is blocked reading the job's stdin
// pipe, whose inode is stdinPipeInode (see PipeInode). The answer comes from
// the kernel's view of each thread, not from the job's output:
//
//   - the thread sleeps interruptibly (state S), and
//   - /proc/PID/task/TID/syscall shows it inside read, readv, pread64,
//     preadv or preadv2 on an fd whose /proc/PID/fd link is pipe:[inode], or
//     inside poll/ppoll, select/pselect6 or epoll_wait/epoll_pwait(2) waiting
//     for that fd to become readable (the fd sets are read from
//     /proc/PID/mem; epoll interest lists from /proc/PID/fdinfo).
//
// The syscall file is preferred over /proc/PID/wchan because the wait channel
// cannot tell which pipe a process reads: a shell waiting on a command
// substitution ($(...)) also sleeps in the pipe read path, and a reader on fd
// 0 looks like one reading any other pipe. It also names the pipe-read
// function differently across kernels (pipe_wait before 5.6, pipe_read,
// anon_pipe_read on recent 6.x kernels; checked on 6.18).
//
// The syscall and mem files need ptrace-attach access: same user and, under
// Yama ptrace_scope=1, an ancestor — the supervisor is one of its jobs, a
// separate CLI process is not. Where the syscall file is unreadable the wait
// channel, which needs only read access, is the fallback: a pipe-read wait
// channel with fd 0 on the job's pipe (which can mistake a read of another
// pipe for input-wait). Where the wait channel reads "0" (kernels or
// containers that hide it) nothing is reported.
func WaitingForInput(pid int, stdinPipeInode uint64, t Target) bool {
	if stdinPipeInode == 0 {
		return false
	}
	return waitingOn(pid, "pipe:["+strconv.FormatUint(stdinPipeInode, 10)+"]", stdinPipeInode, t)
}

// WaitingForTTY is WaitingForInput for a job whose stdin is a terminal (a
// pty job): whether a process of the job is blocked reading the terminal
// the main process has as fd 0, by the same kernel facts, the terminal's
// read path standing for the pipe's in the wait-channel fallback.
func WaitingForTTY(pid int, t Target) bool {
	if pid <= 0 {
		return false
	}
	tty, err := os.Readlink(procRoot + "/" + strconv.Itoa(pid) + "/fd/0")
	if err != nil || !strings.HasPrefix(tty, "/dev/pts/") {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(tty, &st) != nil {
		return false
	}
	return waitingOn(pid, tty, st.Ino, t)
}

// waitingOn is WaitingForInput for the fd link link (pipe:[N] or a
// terminal's path), whose inode is inode.
func waitingOn(pid int, link string, inode uint64, t Target) bool {
	// The main process is the usual reader: ask it before scanning.
	if pid > 0 && processWaitsOn(pid, link, inode) {
		return true
	}
	// Then the rest of its process group, among its descendants (a shell
	// that runs the command as its child, a pipeline). Processes that left
	// the group, or whose parent exited, are not looked for: finding them
	// means reading every process on the machine, and one of them reading
	// the job's stdin is rare enough not to cost every poll that.
	if t.PGID <= 1 || pid <= 0 {
		return false
	}
	for _, m := range groupDescendants(pid, t.PGID) {
		if !m.Dead() && processWaitsOn(m.PID, link, inode) {
			return true
		}
	}
	return false
}

// maxDescendants bounds groupDescendants' walk.
const maxDescendants = 4096

// groupDescendants returns the descendants of pid in process group pgid,
// found through the kernel's children files (/proc/PID/task/TID/children)
// rather than a scan of every process: a poll of a running `sh -c` job
// read the stat file of every process on the machine to find the shell's
// child. Children in another group and theirs are not walked.
func groupDescendants(pid, pgid int) []Info {
	var out []Info
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 && len(seen) < maxDescendants {
		kids, err := childPIDs(queue[0])
		queue = queue[1:]
		if err != nil {
			continue
		}
		for _, k := range kids {
			if seen[k] {
				continue
			}
			seen[k] = true
			if info, err := Inspect(k); err == nil && info.PGID == pgid {
				out = append(out, info)
				queue = append(queue, k)
			}
		}
	}
	return out
}

// processWaitsOn reports whether any thread of pid is blocked reading the
// pipe whose fd link reads link.
func processWaitsOn(pid int, link string, inode uint64) bool {
	dir := procRoot + "/" + strconv.Itoa(pid)
	fds := fdsLinkingTo(dir, link)
	if len(fds) == 0 {
		// Most processes of a job never hold its stdin; skip them
		// without looking at their threads.
		return false
	}
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return false
	}
	for _, task := range tasks {
		tdir := dir + "/task/" + task.Name()
		if !taskSleeping(tdir) {
			continue
		}
		if w, known := syscallWaitsOn(dir, tdir, fds, inode); known {
			if w {
				return true
			}
			continue
		}
		if fds[0] && wchanIsRead(tdir, strings.HasPrefix(link, "/dev/")) {
			return true
		}
	}
	return false
}

// fdsLinkingTo returns the fds of the process in dir whose link reads link.
func fdsLinkingTo(dir, link string) map[int]bool {
	ents, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return nil
	}
	var fds map[int]bool
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/fd/" + e.Name()); err == nil && l == link {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if fds == nil {
				fds = map[int]bool{}
			}
			fds[fd] = true
		}
	}
	return fds
}

// taskSleeping reports whether the thread in tdir is in interruptible
// sleep, the state of a thread blocked in read on an empty pipe.
func taskSleeping(tdir string) bool {
	var buf [1024]byte
	b, err := readSmall(tdir+"/stat", buf[:])
	if err != nil {
		return false
	}
	info, err := parseStat(b)
	return err == nil && info.State == 'S'
}

// syscallWaitsOn decides from tdir/syscall whether the thread is blocked
// reading one of fds. known is false when the file cannot be read or parsed,
// so the caller falls back to the wait channel.
func syscallWaitsOn(dir, tdir string, fds map[int]bool, inode uint64) (waits, known bool) {
	var buf [256]byte
	b, err := readSmall(tdir+"/"+syscallFile, buf[:])
	if err != nil {
		return false, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false, false
	}
	if f[0] == "running" || f[0] == "-1" {
		// Running, or blocked outside a syscall (a page fault): not
		// reading anything.
		return false, true
	}
	if len(f) < 7 {
		return false, false
	}
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return false, false
	}
	var args [6]uint64
	for i := range args {
		if args[i], err = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64); err != nil {
			return false, false
		}
	}
	switch {
	case readSyscalls[nr]:
		return fds[int(int32(args[0]))], true
	case pollSyscalls[nr]:
		return pollWaitsOn(dir, args[0], args[1], fds), true
	case selectSyscalls[nr]:
		return selectWaitsOn(dir, args[0], args[1], fds), true
	case epollSyscalls[nr]:
		return epollWaitsOn(dir, int(int32(args[0])), fds, inode), true
	}
	return false, true
}

// syscallFile is the per-thread file naming the blocking syscall; tests
// point it elsewhere to exercise the wait-channel fallback.
var syscallFile = "syscall"

// readSyscalls, pollSyscalls, selectSyscalls and epollSyscalls hold the
// syscall numbers (of this architecture) whose first arguments say which fd
// is waited on. Architectures that have the older poll/select/epoll_wait add
// them in sysnr_linux_*.go.
var (
	readSyscalls = map[int64]bool{
		unix.SYS_READ: true, unix.SYS_READV: true, unix.SYS_PREAD64: true,
		unix.SYS_PREADV: true, unix.SYS_PREADV2: true,
	}
	pollSyscalls   = map[int64]bool{unix.SYS_PPOLL: true}
	selectSyscalls = map[int64]bool{unix.SYS_PSELECT6: true}
	epollSyscalls  = map[int64]bool{unix.SYS_EPOLL_PWAIT: true, unix.SYS_EPOLL_PWAIT2: true}
)

// maxPollFDs bounds how much of a blocked process's memory is read.
const maxPollFDs = 4096

// pollWaitsOn reads the pollfd array of a thread blocked in poll/ppoll and
// reports whether it waits for one of fds to become readable.
func pollWaitsOn(dir string, addr, n uint64, fds map[int]bool) bool {
	if n == 0 || n > maxPollFDs {
		return false
	}
	buf, ok := readMem(dir, addr, int(n)*8)
	if !ok {
		return false
	}
	for i := 0; i+8 <= len(buf); i += 8 { // struct pollfd { int fd; short events, revents; }
		fd := int(int32(binary.NativeEndian.Uint32(buf[i:])))
		events := binary.NativeEndian.Uint16(buf[i+4:])
		if fds[fd] && events&unix.POLLIN != 0 {
			return true
		}
	}
	return false
}

// selectWaitsOn reads the read fd_set of a thread blocked in select/pselect6
// and reports whether one of fds is in it.
func selectWaitsOn(dir string, nfds, addr uint64, fds map[int]bool) bool {
	if addr == 0 || nfds == 0 || nfds > maxPollFDs {
		return false
	}
	// fd_set is an array of longs; reading whole 8-byte words keeps the
	// bit arithmetic the same on every 64-bit little- and big-endian arch.
	words := (int(nfds) + 63) / 64
	buf, ok := readMem(dir, addr, words*8)
	if !ok {
		return false
	}
	for fd := range fds {
		if fd < 0 || fd >= int(nfds) || fd/64 >= words {
			continue
		}
		if binary.NativeEndian.Uint64(buf[fd/64*8:])&(1<<(fd%64)) != 0 {
			return true
		}
	}
	return false
}

// epollWaitsOn reports whether the epoll instance epfd of the process in dir
// watches the job's pipe for reading, from its /proc/PID/fdinfo entry:
// lines "tfd: N events: HEX data: … ino:HEX sdev:…".
func epollWaitsOn(dir string, epfd int, fds map[int]bool, inode uint64) bool {
	b, err := os.ReadFile(dir + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		events, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || events&unix.EPOLLIN == 0 {
			continue
		}
		// Prefer the inode the kernel prints: the registered fd may
		// have been closed and its number reused since.
		var matched bool
		if ino, ok := fdinfoInode(f[4:]); ok {
			matched = ino == inode
		} else if fd, err := strconv.Atoi(f[1]); err == nil {
			matched = fds[fd]
		}
		if matched {
			return true
		}
	}
	return false
}

// fdinfoInode finds the "ino:HEX" field of an epoll fdinfo line (kernels
// since 4.x print it).
func fdinfoInode(fields []string) (uint64, bool) {
	for _, kv := range fields {
		if v, ok := strings.CutPrefix(kv, "ino:"); ok {
			ino, err := strconv.ParseUint(v, 16, 64)
			return ino, err == nil
		}
	}
	return 0, false
}

// readMem reads n bytes at addr of the process in dir.
func readMem(dir string, addr uint64, n int) ([]byte, bool) {
	f, err := os.Open(dir + "/mem")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, int64(addr)); err != nil {
		return nil, false
	}
	return buf, true
}

// wchanIsRead is wchanIsPipeRead, or for a terminal (tty) whether the
// thread waits in the terminal's read path (n_tty_read; wait_woken, where
// it sleeps, on kernels that show the innermost function).
func wchanIsRead(tdir string, tty bool) bool {
	if !tty {
		return wchanIsPipeRead(tdir)
	}
	b, err := os.ReadFile(tdir + "/wchan")
	if err != nil {
		return false
	}
	w := string(bytes.TrimSpace(b))
	return w == "n_tty_read" || w == "wait_woken"
}

// wchanIsPipeRead reports whether the thread's wait channel is the pipe read
// path under any of the names kernels have used.
func wchanIsPipeRead(tdir string) bool {
	b, err := os.ReadFile(tdir + "/wchan")
	if err != nil {
		return false
	}
	w := string(bytes.TrimSpace(b))
	return strings.Contains(w, "pipe_read") || w == "pipe_wait" || w == "pipe_wait_readable"
}

// MainWaitsForInput is WaitingForInput for listings, which ask it of every
// running job on a page: it looks only at the main thread of the main
// process, blocked reading the pipe on its fd 0. A job whose reader is
// another thread (a Go program) or another process shows as not waiting
// here; WaitingForInput, which poll and status use, finds those too.
func MainWaitsForInput(pid int, stdinPipeInode uint64) bool {
	if pid <= 0 || stdinPipeInode == 0 {
		return false
	}
	dir := procRoot + "/" + strconv.Itoa(pid)
	if l, err := os.Readlink(dir + "/fd/0"); err != nil || l != "pipe:["+strconv.FormatUint(stdinPipeInode, 10)+"]" {
		return false
	}
	return mainReadsStdin(dir, pid, taskSleeping(dir+"/task/"+strconv.Itoa(pid)), stdinPipeInode)
}

// MainWaitsOnStdin is MainWaitsForInput for a listing that has just read
// the main process's stat (main): whatever pipe its fd 0 is, and with the
// main thread's state taken from that stat (the state /proc/PID/stat shows
// is the main thread's). It reads two small files, where
// MainWaitsForInput with the pipe read first reads five.
func MainWaitsOnStdin(main Info) bool {
	if main.PID <= 0 || main.State != 'S' {
		return false
	}
	dir := procRoot + "/" + strconv.Itoa(main.PID)
	l, err := os.Readlink(dir + "/fd/0")
	if err != nil {
		return false
	}
	if strings.HasPrefix(l, "/dev/pts/") { // a pty job's terminal
		var st unix.Stat_t
		if unix.Stat(l, &st) != nil {
			return false
		}
		tdir := dir + "/task/" + strconv.Itoa(main.PID)
		if w, known := syscallWaitsOn(dir, tdir, map[int]bool{0: true}, st.Ino); known {
			return w
		}
		return wchanIsRead(tdir, true)
	}
	if !strings.HasPrefix(l, "pipe:[") {
		return false
	}
	inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "pipe:["), "]"), 10, 64)
	if err != nil || inode == 0 {
		return false
	}
	return mainReadsStdin(dir, main.PID, true, inode)
}

// mainReadsStdin: the main thread of the process in dir, sleeping, is
// inside a read of fd 0 (which holds the pipe inode).
func mainReadsStdin(dir string, pid int, sleeping bool, inode uint64) bool {
	if !sleeping {
		return false
	}
	tdir := dir + "/task/" + strconv.Itoa(pid)
	fds := map[int]bool{0: true}
	if w, known := syscallWaitsOn(dir, tdir, fds, inode); known {
		return w
	}
	return wchanIsPipeRead(tdir)
}
