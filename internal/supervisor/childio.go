package supervisor

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// childIO is what a job's process is attached to, by mode:
//
//   - pipe: stdin a pipe (or /dev/null), stdout and stderr a pipe each,
//     read by two pumps that keep the order within each stream;
//   - pipe with merge: one pipe is both stdout and stderr, so the order of
//     the two is the order of the job's writes; stored as stream stdout;
//   - pty: a pseudo-terminal the supervisor owns, its slave the job's
//     stdin, stdout, stderr and controlling terminal, its master read as
//     the one stream pty and written for input.
type childIO struct {
	childIn, childOut, childErr *os.File // the child's ends
	in                          *os.File // our write end of its input; nil for /dev/null
	out, err                    *os.File // our read ends; err nil when there is one stream
	stream                      logs.Stream
	pty                         bool
	merged                      bool
}

// openChildIO opens what job's process will be attached to.
func openChildIO(job db.Job, req protocol.StartRequest) (*childIO, error) {
	if job.Mode == vocab.ModePTY {
		return openPTY(req.Cols, req.Rows)
	}
	cio := &childIO{stream: logs.Stdout}
	var err error
	if job.Stdin == vocab.StdinPipe {
		cio.childIn, cio.in, err = os.Pipe()
	} else {
		cio.childIn, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	// stdout and stderr are pipes we read ourselves. Cmd.Stdout set to an
	// io.Writer would make os/exec copy in a goroutine that closes the
	// pipe on the first write error, killing the child with SIGPIPE; with
	// *os.File values the child gets the fds directly.
	var err1, err2 error
	cio.out, cio.childOut, err1 = os.Pipe()
	if req.Merge {
		cio.merged = true
		cio.childErr = cio.childOut
	} else {
		cio.err, cio.childErr, err2 = os.Pipe()
	}
	if err := errors.Join(err1, err2); err != nil {
		cio.closeChild()
		cio.closeOurs()
		return nil, fmt.Errorf("pipes: %w", err)
	}
	return cio, nil
}

// openPTY opens a pseudo-terminal of cols×rows (0: the defaults) for a
// pty job.
func openPTY(cols, rows int) (*childIO, error) {
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer master.Close() // its duplicates below stay
	ws := &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}
	if ws.Cols == 0 {
		ws.Cols = protocol.DefaultCols
	}
	if ws.Rows == 0 {
		ws.Rows = protocol.DefaultRows
	}
	if err := pty.Setsize(tty, ws); err != nil {
		tty.Close()
		return nil, fmt.Errorf("set the window size: %w", err)
	}
	// pty.Open hands the master over in blocking mode (its ioctls take
	// the descriptor out of the netpoller). Two duplicates, made
	// non-blocking, are pollable files of their own: one the pump reads,
	// one that Write writes with deadlines, each closed by its owner.
	out, err1 := dupNonblock(master, "pty")
	in, err2 := dupNonblock(master, "pty input")
	if err := errors.Join(err1, err2); err != nil {
		closeAll(tty, out, in)
		return nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	return &childIO{
		childIn: tty, childOut: tty, childErr: tty,
		in: in, out: out, stream: logs.PTY, pty: true,
	}, nil
}

// dupNonblock returns a non-blocking, close-on-exec duplicate of f as a
// file in the netpoller.
func dupNonblock(f *os.File, name string) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// attr is the process attributes of the child. A pipe job gets a process
// group of its own: kill and timeout signal the group, and a terminal's ^C
// to the caller does not reach it. A pty job gets a session of its own,
// whose controlling terminal is the pty (a shell's job control and ^C
// typed into it work); its session leader leads its group too, so the
// group kill reaches it the same way.
func (cio *childIO) attr() *syscall.SysProcAttr {
	if cio.pty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// detail is what the job's running event records about its streams.
func (cio *childIO) detail() map[string]any {
	d := map[string]any{}
	if cio.merged {
		d["merged"] = true
	}
	return d
}

// closeChild closes the child's ends once it has its copies. The pty's
// slave must go too: the master reads EIO, its end of file, only once
// every process holding the slave has closed it.
func (cio *childIO) closeChild() {
	if cio.childErr == cio.childOut {
		cio.childErr = nil
	}
	if cio.childIn == cio.childOut {
		cio.childIn = nil
	}
	closeAll(cio.childIn, cio.childOut, cio.childErr)
}

// closeOurs closes our ends when the child could not start.
func (cio *childIO) closeOurs() { closeAll(cio.in, cio.out, cio.err) }
