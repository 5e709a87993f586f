package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// helperModes holds the helper modes that test files register in their own
// init functions, beside the tests that use them.
var helperModes = map[string]func(args []string) error{}

// runHelper runs the helper process name (the test binary started by jobs
// as a job's command) and returns its exit code.
func runHelper(name string, args []string) int {
	var err error
	if mode, ok := helperModes[name]; ok {
		err = mode(args)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e-helper:", err)
			return 1
		}
		return 0
	}
	switch name {
	case "flood": // flood N: N bytes of the pattern stream on stdout
		n, _ := strconv.ParseInt(args[0], 10, 64)
		_, err = io.CopyN(os.Stdout, pattern(), n)
	case "flood-text": // flood-text N: N bytes of the text pattern (a build log) on stdout
		n, _ := strconv.ParseInt(args[0], 10, 64)
		_, err = io.CopyN(os.Stdout, textPattern(), n)
	case "ignore-term": // ignores SIGTERM, says ready, waits to be killed
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		idle()
	case "ready-idle": // says ready, waits to be signalled
		fmt.Println("ready")
		idle()
	case "daemon": // starts a setsid'd grandchild that keeps our stdout/stderr, then exits 0
		c := exec.Command(os.Args[0], "e2e-helper", "ready-idle")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err = c.Start(); err == nil {
			fmt.Printf("daemon %d\n", c.Process.Pid)
		}
	case "until-eof": // prints a line, then waits for stdin to close
		fmt.Println("started")
		_, err = io.Copy(io.Discard, os.Stdin)
	case "hold-lock": // hold-lock DB DURATION: holds the write lock, says locked, lets go after DURATION
		err = holdLock(args[0], args[1])
	default:
		err = fmt.Errorf("unknown helper %q", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-helper:", err)
		return 1
	}
	return 0
}

// pattern is the deterministic byte stream the flood helper writes; the
// test regenerates it to check what was captured. All byte values occur.
func pattern() io.Reader {
	return bufio.NewReaderSize(rand.NewChaCha8([32]byte{'e', '2', 'e'}), 1<<16)
}

// textPattern is an endless build log, the same every time: lines of
// compiler output, which the database stores compressed.
func textPattern() io.Reader { return bufio.NewReaderSize(&buildLog{}, 1<<16) }

type buildLog struct {
	i   int
	buf []byte
}

func (l *buildLog) Read(p []byte) (int, error) {
	for len(l.buf) < len(p) {
		i := l.i
		l.i++
		if i%4 == 3 {
			l.buf = fmt.Appendf(l.buf, "src/mod%d/file%d.c:%d:%d: warning: unused variable 'x%d' [-Wunused-variable]\n", i%13, i%977, i%1999, i%79, i%101)
		} else {
			l.buf = fmt.Appendf(l.buf, "%08d  CC      src/mod%d/file%d.o\n", i, i%13, i%977)
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[:copy(l.buf, l.buf[n:])]
	return n, nil
}

// idle blocks until the process is killed.
func idle() {
	for {
		time.Sleep(time.Hour)
	}
}

// holdLock takes SQLite's write lock on the database (db.DSN makes BeginTx
// a BEGIN IMMEDIATE, which takes the lock at once), prints "locked", holds it for the given duration (the fault being
// injected), then commits.
func holdLock(path, hold string) error {
	d, err := time.ParseDuration(hold)
	if err != nil {
		return err
	}
	sqldb, err := sql.Open("sqlite", db.DSN(path))
	if err != nil {
		return err
	}
	defer sqldb.Close()
	ctx := context.Background()
	tx, err := sqldb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Println("locked")
	time.Sleep(d) // the fault: keep the lock this long
	return tx.Commit()
}

// lockedBuffer is a bytes.Buffer that a process's output may fill while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// unavailable ends a test that cannot run here: a skip on a developer's
// machine, a failure in CI (CI=true), where scripts/deps.sh installs every
// tool and the runner is root, so a missing one is a broken set-up rather
// than a reason to test less.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot run in CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// needTool ends the test through unavailable unless the program is on PATH.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		unavailable(t, "needs %s (scripts/deps.sh installs it)", name)
	}
}
