package e2e

// Section E of the reliability matrix ("found later"), the cases that
// reach jobs through its wire and its launcher: JSON-RPC on `jobs mcp`
// (E4), the signal mask a launcher hands down (E5), a write-ahead log
// deleted after a crash (B12) and invisible or bidirectional control
// characters in text shown to people and agents (E9).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	"golang.org/x/sys/unix"
)

func init() {
	// write-hex HEX: writes the bytes HEX spells to stdout.
	helperModes["write-hex"] = func(args []string) error {
		b, err := hex.DecodeString(args[0])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	// wal-commit DB LABEL [checkpoint]: commits a new label for every job
	// through the WAL (copied into the database with checkpoint), says
	// "committed" and waits to be killed.
	helperModes["wal-commit"] = func(args []string) error {
		d, err := sqlOpen(args[0])
		if err != nil {
			return err
		}
		d.SetMaxOpenConns(1)
		if _, err := d.Exec(`UPDATE jobs SET label = ?`, args[1]); err != nil {
			return err
		}
		if len(args) > 2 {
			var busy, frames, copied int
			if err := d.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
				return err
			}
			if busy != 0 || frames != copied {
				return fmt.Errorf("checkpoint: busy %d, %d frames, %d copied", busy, frames, copied)
			}
		}
		fmt.Println("committed")
		idle()
		return nil
	}
	// sigblock-exec ARGV…: blocks SIGPIPE, SIGALRM and SIGUSR2, ignores
	// SIGHUP, SIGTSTP and SIGTTOU, then execs ARGV: a launcher that hands
	// all of it down.
	helperModes["sigblock-exec"] = func(args []string) error {
		runtime.LockOSThread()
		var set unix.Sigset_t
		for _, s := range launcherBlocked {
			set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
		}
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
			return err
		}
		signal.Ignore(launcherIgnored...)
		return syscall.Exec(args[0], args, os.Environ())
	}
	// embed-sigstatus DB: a program that embeds the supervisor through
	// pkg/jobs runs sigStatusArgv and prints its output.
	helperModes["embed-sigstatus"] = func(args []string) error {
		ctx := context.Background()
		c, err := jobs.Open(ctx, jobs.Options{DB: args[0], Scope: "embed"})
		if err != nil {
			return err
		}
		defer c.Close()
		j, err := c.Start(ctx, jobs.Spec{Argv: sigStatusArgv})
		if err != nil {
			return err
		}
		if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
			return err
		}
		out, err := c.Log(ctx, j.ID, jobs.Range{})
		if err != nil {
			return err
		}
		fmt.Print(out.Text)
		return nil
	}
}

var (
	launcherBlocked = []syscall.Signal{syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGUSR2}
	launcherIgnored = []os.Signal{syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTOU}
	// sigStatusArgv prints the signal mask and the ignored signals a job
	// starts with (grep changes neither).
	sigStatusArgv = []string{"grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"}
)

// rawMCP is `jobs mcp` driven with raw lines, as a misbehaving client
// would drive it.
type rawMCP struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	done  chan error
	seen  [][]byte // every line read so far, for failure messages
}

func (w *world) rawMCP() *rawMCP {
	w.t.Helper()
	c := w.cmd("mcp")
	c.Env = w.mcpEnviron()
	in, err := c.StdinPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	var stderr lockedBuffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	r := &rawMCP{t: w.t, cmd: c, in: in, lines: make(chan []byte, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			r.lines <- bytes.Clone(sc.Bytes())
		}
		close(r.lines)
		r.done <- c.Wait()
	}()
	w.t.Cleanup(func() {
		in.Close()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			c.Process.Kill()
		}
		if w.t.Failed() {
			w.t.Logf("jobs mcp stderr: %s", stderr.String())
		}
	})
	return r
}

// write sends bytes as they are (no newline added).
func (r *rawMCP) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, s); err != nil {
		r.t.Fatalf("write %.80q: %v (the server has exited?)", s, err)
	}
}

func (r *rawMCP) send(line string) { r.t.Helper(); r.write(line + "\n") }

// next returns the next line the server writes that is not a
// notification, failing the test when the server exits or stays silent.
func (r *rawMCP) next(what string) []byte {
	r.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				err := <-r.done
				r.done <- err
				r.t.Fatalf("%s: jobs mcp ended its output (%v); it wrote:\n%s", what, err, bytes.Join(r.seen, []byte("\n")))
			}
			r.seen = append(r.seen, line)
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) == nil && m["method"] != nil && m["id"] == nil {
				continue // a notification
			}
			return line
		case <-deadline:
			r.t.Fatalf("%s: no answer from jobs mcp after 60s; it wrote:\n%s", what, bytes.Join(r.seen, []byte("\n")))
		}
	}
}

func (r *rawMCP) initialize(version string) {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := members(r.t, r.next("initialize")); m["result"] == nil {
		r.t.Fatalf("initialize: %s", r.seen[len(r.seen)-1])
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// members splits one JSON object into its members, raw.
func members(t *testing.T, line []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", line, err)
	}
	return m
}

// errorCode returns the code of a JSON-RPC error response, or 0.
func errorCode(m map[string]json.RawMessage) int {
	var e struct {
		Code int `json:"code"`
	}
	if m["error"] == nil || json.Unmarshal(m["error"], &e) != nil {
		return 0
	}
	return e.Code
}

// TestE4JSONRPCBatchAnsweredIDsEchoed: after initialize (protocol
// 2025-06-18, which has no batches), a JSON-RPC batch is answered with an
// error for each request in it and the server keeps serving; every id comes
// back exactly as sent, byte for byte, past int64 and float64 included;
// frames split over writes or joined in one are each answered. On a session
// that negotiated 2025-03-26 (which has batches) a batch is answered in
// full.
func TestE4JSONRPCBatchAnsweredIDsEchoed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)

	t.Run("batch refused on 2025-06-18", func(t *testing.T) {
		r := w.rawMCP()
		r.t = t
		r.initialize("2025-06-18")
		r.send(`[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
		got := map[string]int{}
		for range 2 {
			line := r.next("batch")
			m := members(t, line)
			if m["result"] != nil || errorCode(m) != -32600 {
				t.Errorf("a request in a batch got %s, want a -32600 error (no batches in 2025-06-18)", line)
			}
			got[string(m["id"])]++
		}
		if got["6"] != 1 || got["7"] != 1 {
			t.Errorf("batch answers by id = %v, want one for 6 and one for 7", got)
		}
		r.send(`[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}]`)
		if m := members(t, r.next("batch of notifications")); string(m["id"]) != "null" || errorCode(m) != -32600 {
			t.Errorf("a batch of notifications got %s, want a -32600 error with id null", r.seen[len(r.seen)-1])
		}
		r.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
		if m := members(t, r.next("ping after the batch")); string(m["id"]) != "8" || m["result"] == nil {
			t.Fatalf("ping after a batch: %s", r.seen[len(r.seen)-1])
		}
		t.Logf("MATRIX-FIGURE batch on 2025-06-18: 2 of 2 requests answered with -32600, the session serves on")
	})

	t.Run("ids echoed exactly", func(t *testing.T) {
		r := w.rawMCP()
		r.t = t
		r.initialize("2025-06-18")
		long := `"` + strings.Repeat(`x\u00e9\"\\`, 2000) + `"`
		ids := []string{
			`18446744073709551615`, // 2^64-1: past int64
			`9223372036854775808`,  // 2^63
			`9223372036854775807`,  // 2^63-1
			`-9223372036854775809`, // below int64
			`9007199254740993`,     // 2^53+1: past float64's integers
			`1e30`,                 // exponent form
			`1E+2`,                 // another spelling of 100
			`100000000000000000000000000000000000000000000000000000000000000000000000000000000`,
			`12.5`, `-0`, `0`, `"7"`, `"a\u00e9"`, `""`, long,
		}
		defer func() {
			if !t.Failed() {
				t.Logf("MATRIX-FIGURE %d of %d ids echoed byte for byte (2^64-1, 2^53+1, 1e30, 12.5, -0, escaped strings, a 24 kB string), in results and errors", len(ids), len(ids))
			}
		}()
		for _, id := range ids {
			r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
			line := r.next("ping " + id[:min(len(id), 40)])
			m := members(t, line)
			if !bytes.Equal(m["id"], []byte(id)) {
				t.Errorf("ping with id %.60s: answer has id %.60s, want it exactly as sent", id, m["id"])
			}
			if m["result"] == nil {
				t.Errorf("ping with id %.60s: %.200s", id, line)
			}
		}
		// An error answer echoes the id too: one from the SDK (no such
		// method) and one from the frame filter (bad params type).
		for _, frame := range []string{
			`{"jsonrpc":"2.0","id":18446744073709551616,"method":"no/such"}`,
			`{"jsonrpc":"2.0","id":1e300,"method":"tools/call","params":"nope"}`,
			`{"jsonrpc":"1.0","id":36893488147419103232,"method":"ping"}`,
		} {
			r.send(frame)
			m := members(t, r.next(frame))
			id := frame[strings.Index(frame, `"id":`)+5 : strings.Index(frame, `,"method"`)]
			if string(m["id"]) != id || errorCode(m) == 0 {
				t.Errorf("%s: answer %s, want an error with id %s", frame, r.seen[len(r.seen)-1], id)
			}
		}
		// A request the client cancels by its (huge) id is not answered,
		// also when the input ends (the server then waits for every
		// request it has not answered, and would answer this one at the
		// end of its wait).
		id := w.start("sleep 300")
		big := `99999999999999999999`
		r.send(`{"jsonrpc":"2.0","id":` + big + `,"method":"tools/call","params":{"name":"process","arguments":{"action":"wait","sessionId":"` + id + `","timeout":50}}}`)
		r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + big + `,"reason":"test"}}`)
		r.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		if m := members(t, r.next("ping after a cancelled call")); string(m["id"]) != "3" {
			t.Errorf("answer %s, want the ping's (id 3)", r.seen[len(r.seen)-1])
		}
		r.in.Close()
		for line := range r.lines {
			if bytes.Contains(line, []byte(big)) {
				t.Errorf("the cancelled request was answered: %.200s", line)
			}
		}
		w.ok("kill", id)
	})

	t.Run("frames split and joined", func(t *testing.T) {
		r := w.rawMCP()
		r.t = t
		r.initialize("2025-06-18")
		frame := `{"jsonrpc":"2.0","id":21,"method":"tools/list"}` + "\n"
		for i := 0; i < len(frame); i += 7 {
			r.write(frame[i:min(i+7, len(frame))])
		}
		if m := members(t, r.next("split frame")); string(m["id"]) != "21" || m["result"] == nil {
			t.Fatalf("split frame: %.200s", r.seen[len(r.seen)-1])
		}
		r.write(`{"jsonrpc":"2.0","id":22,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":23,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":24,`)
		r.write(`"method":"ping"}` + "\n")
		got := map[string]bool{}
		for range 3 {
			got[string(members(t, r.next("joined frames"))["id"])] = true
		}
		if !got["22"] || !got["23"] || !got["24"] {
			t.Errorf("joined frames answered %v, want 22, 23 and 24", got)
		}
	})

	t.Run("batch answered on 2025-03-26", func(t *testing.T) {
		r := w.rawMCP()
		r.t = t
		r.initialize("2025-03-26")
		r.send(`[{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":"b","method":"ping"}]`)
		line := r.next("batch")
		var answers []map[string]json.RawMessage
		if err := json.Unmarshal(line, &answers); err != nil {
			t.Fatalf("a batch on 2025-03-26 got %s, want an array of answers", line)
		}
		got := map[string]bool{}
		for _, a := range answers {
			if a["result"] == nil {
				t.Errorf("batch answer without a result: %s", line)
			}
			got[string(a["id"])] = true
		}
		if len(answers) != 2 || !got["18446744073709551615"] || !got[`"b"`] {
			t.Errorf("batch answers %s, want results for 18446744073709551615 and \"b\"", line)
		}
		// A second batch with a notification in it (the SDK alone ended
		// the session here), and a ping after it.
		r.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":"c","method":"ping"}]`)
		if line := r.next("second batch"); !bytes.Contains(line, []byte(`"id":"c","result"`)) {
			t.Errorf("second batch: %s, want the answer to \"c\"", line)
		}
		r.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
		if m := members(t, r.next("ping after the batches")); string(m["id"]) != "8" {
			t.Fatalf("ping after the batches: %s", r.seen[len(r.seen)-1])
		}
	})
}

// checkSigStatus fails the test unless out (sigStatusArgv's output) shows
// no blocked and no ignored signal.
func checkSigStatus(t *testing.T, what, out string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigBlk" && k != "SigIgn" {
			continue
		}
		n++
		if v = strings.TrimSpace(v); strings.Trim(v, "0") != "" {
			t.Errorf("%s: the job started with %s %s, want none (the launcher blocked %v and ignored %v)", what, k, v, launcherBlocked, launcherIgnored)
		}
	}
	if n != 2 {
		t.Fatalf("%s: no SigBlk and SigIgn lines in the job's output %q", what, out)
	}
}

// TestE5SignalMaskNotInherited: a launcher blocks SIGPIPE, SIGALRM and
// SIGUSR2 and ignores SIGHUP, SIGTSTP and SIGTTOU; a job still starts with
// an empty signal mask and default dispositions, whether the launcher runs
// the CLI (which starts the supervisor), runs `jobs supervise` itself, or
// is a program that embeds the supervisor through pkg/jobs.
func TestE5SignalMaskNotInherited(t *testing.T) {
	t.Parallel()
	launch := func(w *world, argv ...string) *exec.Cmd {
		c := exec.Command(helperBin, append([]string{"e2e-helper", "sigblock-exec"}, argv...)...)
		c.Env = w.environ()
		c.WaitDelay = time.Minute // a hang guard (a descendant holding the pipe), not a bound on speed: a loaded machine can take seconds to drain the pipe
		return c
	}
	t.Run("CLI starts the supervisor", func(t *testing.T) {
		w := newWorld(t)
		w.t = t
		out, err := launch(w, append([]string{jobsBin, "start", "--wait", "--"}, sigStatusArgv...)...).Output()
		if err != nil {
			t.Fatalf("jobs start --wait under the launcher: %v\n%s", err, out)
		}
		checkSigStatus(t, "CLI-started supervisor", string(out))
	})
	t.Run("launcher runs jobs supervise", func(t *testing.T) {
		w := newWorld(t)
		w.t = t
		sup := launch(w, jobsBin, "supervise", "--idle", "60s")
		var stderr lockedBuffer
		sup.Stderr = &stderr
		if err := sup.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sup.Process.Signal(syscall.SIGTERM)
			sup.Wait()
		})
		waitFor(t, 60*time.Second, "the launched supervisor's socket", func() bool {
			m, _ := filepath.Glob(filepath.Join(w.run, "jobs", "*", "default.sock"))
			return len(m) == 1
		})
		id := w.start(append([]string{"--"}, sigStatusArgv...)...)
		w.ok("wait", id)
		checkSigStatus(t, "launched supervisor", w.ok("log", id))
		// The job ran on the launched supervisor, not on one the CLI
		// started.
		var pid int
		if err := w.sqlDB().QueryRow(`SELECT s.pid FROM jobs j JOIN supervisors s ON s.id = j.supervisor_id WHERE j.id = ?`, id).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if pid != sup.Process.Pid {
			t.Fatalf("the job ran on supervisor pid %d, not the launched one (%d): %s", pid, sup.Process.Pid, stderr.String())
		}
	})
	t.Run("embedded through pkg/jobs", func(t *testing.T) {
		w := newWorld(t)
		w.t = t
		out, err := launch(w, helperBin, "e2e-helper", "embed-sigstatus", filepath.Join(w.base, "embed.db")).CombinedOutput()
		if err != nil {
			t.Fatalf("embedding program under the launcher: %v\n%s", err, out)
		}
		checkSigStatus(t, "embedded supervisor", string(out))
	})
	if !t.Failed() {
		t.Logf("MATRIX-FIGURE SigBlk 0 and SigIgn 0 in jobs on 3 of 3 launch paths (CLI, jobs supervise, pkg/jobs) under a launcher that blocked %v and ignored %v", launcherBlocked, launcherIgnored)
	}
}

// shmFrames reads the frame counts of a WAL index header (mxFrame, and
// nBackfill: how many were copied into the database), little-endian.
func shmFrames(t *testing.T, shm string) (frames, copied uint32, ok bool) {
	t.Helper()
	b, err := os.ReadFile(shm)
	if err != nil || len(b) < 100 {
		return 0, 0, false
	}
	le := func(o int) uint32 { return uint32(b[o]) | uint32(b[o+1])<<8 | uint32(b[o+2])<<16 | uint32(b[o+3])<<24 }
	return le(16), le(96), true
}

// TestE7DeletedWALDetected: a -wal deleted after a crash while it held
// changes the database file lacks is refused in one line by every verb,
// from the evidence SQLite leaves in the -shm (which is read before SQLite
// opens the file and rebuilds it); no byte of the database or the -shm
// changes. A -wal whose changes were all copied into the database loses
// nothing and is used; without the -shm nothing can be seen (documented).
func TestE7DeletedWALDetected(t *testing.T) {
	t.Parallel()
	crash := func(t *testing.T, checkpoint bool) (*world, string) {
		w, id := finishedWorld(t)
		w.t = t
		args := []string{"e2e-helper", "wal-commit", w.dbPath(), "after-the-crash"}
		if checkpoint {
			args = append(args, "checkpoint")
		}
		c := exec.Command(helperBin, args...)
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "committed\n" {
			c.Process.Kill()
			c.Wait()
			t.Fatalf("the writer: %q %v", line, err)
		}
		c.Process.Kill()
		c.Wait()
		for _, f := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(w.dbPath() + f); err != nil {
				t.Fatalf("after kill -9 of the writer: %v", err)
			}
		}
		return w, id
	}
	label := func(w *world, id string) string {
		var s struct {
			Job struct {
				Label string `json:"label"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(w.ok("--json", "status", id)), &s); err != nil {
			w.t.Fatal(err)
		}
		return s.Job.Label
	}

	t.Run("changes lost", func(t *testing.T) {
		w, id := crash(t, false)
		frames, copied, _ := shmFrames(t, w.dbPath()+"-shm")
		if err := os.Remove(w.dbPath() + "-wal"); err != nil {
			t.Fatal(err)
		}
		dbSHA, shmSHA := fileSHA(t, w.dbPath()), fileSHA(t, w.dbPath()+"-shm")
		for _, args := range [][]string{{"list"}, {"poll", id}, {"--json", "status", id}, {"log", id}, {"start", "--", "true"}, {"gc"}} {
			r := w.jobs(args...)
			oneErrorLine(t, r, "jobs: database corrupt: "+w.dbPath()+": its write-ahead log "+w.dbPath()+"-wal is missing")
		}
		if fileSHA(t, w.dbPath()) != dbSHA || fileSHA(t, w.dbPath()+"-shm") != shmSHA {
			t.Errorf("the database or its -shm changed")
		}
		if _, err := os.Stat(w.dbPath() + "-wal"); err == nil {
			t.Errorf("a -wal was created")
		}
		// Moved away, as the message says: the database is used as it
		// was before the lost changes, which are indeed gone.
		if err := os.Rename(w.dbPath()+"-shm", w.dbPath()+"-shm.lost"); err != nil {
			t.Fatal(err)
		}
		if got := label(w, id); got == "after-the-crash" {
			t.Errorf("label %q: the change was not lost after all", got)
		}
		t.Logf("MATRIX-FIGURE -wal deleted after kill -9 with %d of %d frames not yet copied: refused in one line by 6 of 6 verbs, 0 bytes changed", frames-copied, frames)
	})

	t.Run("changes copied before the crash", func(t *testing.T) {
		w, id := crash(t, true)
		if err := os.Remove(w.dbPath() + "-wal"); err != nil {
			t.Fatal(err)
		}
		if got := label(w, id); got != "after-the-crash" {
			t.Errorf("label %q, want the committed and copied one", got)
		}
		w.waitTerminal(w.start("--no-stdin", "--", "true"), 30*time.Second)
	})

	t.Run("no -shm either", func(t *testing.T) {
		w, id := crash(t, false)
		for _, f := range []string{"-wal", "-shm"} {
			if err := os.Remove(w.dbPath() + f); err != nil {
				t.Fatal(err)
			}
		}
		// Nothing shows what was lost: the database is used as it is
		// (the documented limit).
		if got := label(w, id); got == "after-the-crash" {
			t.Errorf("label %q after the -wal was deleted", got)
		}
	})
}

// invisibles are the characters a terminal does not show but that reorder
// or disguise text: the bidirectional controls and the zero-width
// characters (textclean.Invisible).
var invisibles = []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff}

// rawInvisible returns the first invisible character in s, or 0.
func rawInvisible(s string) rune {
	for _, r := range s {
		for _, x := range invisibles {
			if r == x {
				return r
			}
		}
	}
	return 0
}

// TestE9BidiAndInvisibleEscaped: output holding every bidirectional
// control and zero-width character (and a NUL) is stored byte for byte,
// and every text that shows it to a person or an agent (poll, poll --new,
// log --clean, --json poll, the MCP process tool) writes each of them as
// a \uNNNN escape, never raw; so does list for a label holding them.
func TestE9BidiAndInvisibleEscaped(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var payload strings.Builder
	payload.WriteString("start ")
	for _, r := range invisibles {
		payload.WriteString(fmt.Sprintf("<%04x:", r))
		payload.WriteRune(r)
		payload.WriteString(">")
	}
	payload.WriteString(" nul:\x00 end\n")
	want := payload.String()
	id := w.start(append([]string{"--no-stdin", "--label", "lab\u202eel\u200b"}, helper("write-hex", hex.EncodeToString([]byte(want)))...)...)
	w.ok("wait", id)

	if got := w.ok("log", id); got != want {
		t.Errorf("stored output is not byte-exact:\n got %q\nwant %q", got, want)
	}
	check := func(what, text string) {
		t.Helper()
		if r := rawInvisible(text); r != 0 {
			t.Errorf("%s shows U+%04X raw: %q", what, r, text)
		}
		for _, r := range invisibles {
			if esc := fmt.Sprintf(`<%04x:\u%04x>`, r, r); !strings.Contains(text, esc) {
				t.Errorf("%s lacks %s: %q", what, esc, text)
			}
		}
	}
	check("poll", w.ok("poll", id))
	check("log --clean", w.ok("log", "--clean", id))
	js := w.ok("--json", "poll", id)
	if r := rawInvisible(js); r != 0 {
		t.Errorf("--json poll writes U+%04X raw", r)
	}
	var p struct {
		Output struct {
			Output string `json:"output"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	check("--json poll", p.Output.Output)
	id2 := w.start(append([]string{"--no-stdin"}, helper("write-hex", hex.EncodeToString([]byte(want)))...)...)
	w.ok("wait", id2)
	check("poll --new", w.ok("poll", "--new", id2))

	list := w.ok("list")
	if r := rawInvisible(list); r != 0 || !strings.Contains(list, `lab\u202eel\u200b`) {
		t.Errorf("list shows the label %q raw or not at all:\n%s", "lab\u202eel\u200b", list)
	}

	r := w.rawMCP()
	r.initialize("2025-06-18")
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process","arguments":{"action":"log","sessionId":"` + id + `"}}}`)
	var res struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	line := r.next("process log")
	if err := json.Unmarshal(line, &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("process log: %s", line)
	}
	var text strings.Builder
	for _, c := range res.Result.Content {
		text.WriteString(c.Text)
	}
	check("MCP process log", text.String())
	t.Logf("MATRIX-FIGURE %d bidi and zero-width characters stored byte-exact and shown as \\u escapes on 6 of 6 text paths", len(invisibles))
}
