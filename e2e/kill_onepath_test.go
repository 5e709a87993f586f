package e2e

// One control path: the same kill scenarios through every front end that
// ends or signals a job (the CLI's `jobs kill --json`, the default MCP
// profile's kill_process, the macos-shell profile's kill_process,
// package jobs, and a supervisor over its socket) give the same result,
// compared field by field.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpProfile connects an MCP client to `jobs mcp --profile NAME`.
func (w *world) mcpProfile(name string) *sdk.ClientSession {
	w.t.Helper()
	cmd := exec.Command(jobsBin, "mcp", "--profile", name)
	cmd.Env = w.mcpEnviron()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		w.t.Fatalf("connect to jobs mcp --profile %s: %v", name, err)
	}
	w.t.Cleanup(func() { cs.Close() })
	return cs
}

// killView is what a kill result says, in the engine's words, whichever
// front end gave it.
type killView struct {
	Err         string // "invalid" for a refused request, else ""
	Status      string // the job's status after the kill
	AlreadyDone bool
	Escalated   bool
	Signalled   int
	Survivors   int
	Signal      string // the one signal sent, for a signal that does not end the job
	Ended       bool   // the scenario's processes no longer run
}

// killRequest is one scenario's kill as each front end is asked it.
type killRequest struct {
	sig   string        // "" for none
	grace time.Duration // 0 the default, vocab.NoGrace none
	force bool          // macos-shell's force=true (its name for KILL)
}

// statusWords translate each profile's status words back to the
// engine's, for the status it reports (several engine words may share
// one profile word).
var statusWords = map[string]map[string][]string{
	"mcp":         {"running": {"starting", "running"}, "done": {"done"}, "killed": {"killed", "timed_out"}, "error": {"failed", "lost"}},
	"macos-shell": {"starting": {"starting"}, "running": {"running"}, "stopped": {"done"}, "killed": {"killed", "timed_out"}, "failed": {"failed", "lost"}},
}

func TestKillOnePathAllFrontEnds(t *testing.T) {
	t.Parallel() // a world of its own; waits on node and jobs more than it computes
	w := newWorld(t)
	ctx := context.Background()
	// A job first, so that the detached supervisor runs and the
	// database exists for the package's client. It runs until the test
	// ends: a supervisor with no job of its own exits after a minute
	// idle, which a loaded machine reached before the scenarios that kill
	// through the supervisor's socket ("no live supervisor").
	keeper := w.start(helper("ready-idle")...)
	w.waitOutput(keeper, "ready")
	t.Cleanup(func() { w.jobs("kill", keeper) })
	c, err := jobs.Open(ctx, jobs.Options{DB: w.dbPath(), Executable: jobsBin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	def, mac := w.mcp(), w.mcpProfile("macos-shell")

	// tracked is a process of a scenario: its end is part of the result.
	type tracked struct {
		pid   int
		start int64
	}
	track := func(pid int) tracked {
		_, start, _ := procState(pid)
		return tracked{pid, start}
	}
	// Each scenario makes a fresh job and says which processes the kill
	// must end (or leave).
	type scenario struct {
		name  string
		setup func(t *testing.T) (string, []tracked)
		req   killRequest
		fes   []string // front ends that can express the request
		want  killView
	}
	running := func(helperName string) func(t *testing.T) (string, []tracked) {
		return func(t *testing.T) (string, []tracked) {
			id := w.start(helper(helperName)...)
			w.waitOutput(id, "ready")
			return id, []tracked{track(w.poll(id).PID)}
		}
	}
	leftover := func(t *testing.T) (string, []tracked) {
		id := w.start(helper("fork-grandchild")...)
		out := w.waitOutput(id, "grandchild ")
		pid, _ := strconv.Atoi(strings.Fields(out[strings.Index(out, "grandchild "):])[1])
		g := track(pid)
		t.Cleanup(func() { killLeftover(g.pid, g.start) })
		if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" {
			t.Fatalf("leftover scenario: job %s", j.Status)
		}
		return id, []tracked{g}
	}
	lost := func(t *testing.T) (string, []tracked) {
		// The process of a job whose supervisor died: its row is
		// forged with the process's own pid, group and start time.
		p := exec.Command(helperBin, "e2e-helper", "ready-idle")
		p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := p.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("lost scenario: the process said %q", line)
		}
		pr := track(p.Process.Pid)
		return forgeRunning(t, w, pr.pid, pr.pid, pr.start), []tracked{pr}
	}
	all := []string{"cli", "mcp", "macos-shell", "jobs", "supervisor"}
	killers := []string{"cli", "mcp", "macos-shell", "jobs"} // take a signal for a kill
	graced := []string{"cli", "jobs", "supervisor"}          // take a grace period
	scenarios := []scenario{
		{name: "running job", setup: running("ready-idle"), fes: all,
			want: killView{Status: "killed", Signalled: 1, Ended: true}},
		{name: "job ignoring SIGTERM", setup: running("ignore-term"), fes: all,
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "finished job with a leftover process", setup: leftover, fes: all,
			want: killView{Status: "done", AlreadyDone: true, Signalled: 1, Ended: true}},
		{name: "lost job with a survivor", setup: lost, fes: all,
			want: killView{Status: "lost", AlreadyDone: true, Signalled: 1, Ended: true}},
		{name: "no grace", setup: running("ignore-term"), req: killRequest{grace: vocab.NoGrace}, fes: graced,
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "negative grace", setup: running("ready-idle"), req: killRequest{grace: -time.Second}, fes: graced,
			want: killView{Err: "invalid", Status: "running"}},
		{name: "KILL", setup: running("ignore-term"), req: killRequest{sig: "KILL"}, fes: killers,
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "9", setup: running("ignore-term"), req: killRequest{sig: "9"}, fes: killers,
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "SIGKILL", setup: running("ignore-term"), req: killRequest{sig: "SIGKILL"}, fes: killers,
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "force", setup: running("ignore-term"), req: killRequest{force: true}, fes: []string{"macos-shell"},
			want: killView{Status: "killed", Signalled: 1, Escalated: true, Ended: true}},
		{name: "15", setup: running("ready-idle"), req: killRequest{sig: "15"}, fes: killers,
			want: killView{Status: "killed", Signalled: 1, Ended: true}},
		{name: "CONT by name", setup: running("ready-idle"), req: killRequest{sig: "CONT"}, fes: all,
			want: killView{Status: "running", Signalled: 1, Signal: "CONT"}},
		{name: "CONT by number", setup: running("ready-idle"), req: killRequest{sig: strconv.Itoa(int(syscall.SIGCONT))}, fes: killers,
			want: killView{Status: "running", Signalled: 1, Signal: "CONT"}},
	}

	// kill asks front end fe and returns its answer as a view (Status and
	// Ended are filled in after).
	kill := func(t *testing.T, fe, id string, r killRequest) (killView, string) {
		t.Helper()
		var v killView
		switch fe {
		case "cli":
			args := []string{"--json", "kill", id}
			if r.sig != "" {
				args = append(args, "--signal", r.sig)
			}
			switch {
			case r.grace == vocab.NoGrace:
				args = append(args, "--grace", "0s")
			case r.grace != 0:
				args = append(args, "--grace", r.grace.String())
			}
			res := w.jobs(args...)
			if res.code == 2 && strings.Contains(res.stderr, "grace") {
				return killView{Err: "invalid"}, res.stderr
			}
			var m map[string]any
			if res.code != 0 || json.Unmarshal([]byte(res.stdout), &m) != nil {
				t.Fatalf("%v", res)
			}
			v = viewOf(m, "already_done", "escalated", "signal", "status")
			return v, res.stdout
		case "mcp", "macos-shell":
			tool, args := "kill_process", map[string]any{"action": "kill", "sessionId": id}
			cs := def
			if fe == "macos-shell" {
				cs, args = mac, map[string]any{"processId": id}
				if r.force {
					args["force"] = true
				}
			}
			if r.sig != "" {
				args["signal"] = r.sig
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s %s %v: %v %+v", fe, tool, args, err, res)
			}
			var m map[string]any
			if fe == "mcp" {
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("%s: %v: %s", fe, err, b)
				}
				v = viewOf(m, "already_done", "escalated", "signal", "status")
			} else {
				text := res.Content[0].(*sdk.TextContent).Text
				if err := json.Unmarshal([]byte(text), &m); err != nil {
					t.Fatalf("%s: %v: %s", fe, err, text)
				}
				v = viewOf(m, "alreadyDone", "escalated", "signal", "newStatus")
			}
			b, _ := json.Marshal(m)
			return v, string(b)
		case "jobs":
			k, err := c.KillSignal(ctx, id, r.sig, r.grace)
			if errors.Is(err, jobs.ErrInvalid) {
				return killView{Err: "invalid"}, err.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(k)
			return killView{Status: string(k.Status), AlreadyDone: k.AlreadyDone, Escalated: k.Escalated,
				Signalled: len(k.Signalled), Survivors: len(k.Survivors), Signal: k.Signal}, string(b)
		case "supervisor":
			// The live detached supervisor (forged rows name dead ones).
			var sock string
			rows, err := w.sqlDB().QueryContext(ctx, `SELECT socket_path, pid FROM supervisors WHERE ended_at IS NULL ORDER BY started_at DESC`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var path string
				var pid int
				if err := rows.Scan(&path, &pid); err == nil && sock == "" && isSupervisorOf(pid, jobsBin) {
					sock = path
				}
			}
			rows.Close()
			if sock == "" {
				t.Fatal("no live supervisor")
			}
			conn, err := protocol.Dial(ctx, sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if r.sig != "" {
				pids, err := conn.Signal(ctx, id, r.sig)
				if err != nil {
					t.Fatal(err)
				}
				return killView{Signal: strings.TrimPrefix(strings.ToUpper(r.sig), "SIG"), Signalled: len(pids)}, fmt.Sprint(pids)
			}
			k, err := conn.Kill(ctx, id, r.grace)
			if errors.Is(err, vocab.ErrInvalid) {
				return killView{Err: "invalid"}, err.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(k)
			return killView{Status: string(k.Status), AlreadyDone: k.AlreadyDone, Escalated: k.Escalated,
				Signalled: len(k.Signalled), Survivors: len(k.Survivors), Signal: k.Signal}, string(b)
		}
		t.Fatalf("unknown front end %s", fe)
		return v, ""
	}

	fields, runs := 0, 0
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, fe := range sc.fes {
				id, procs := sc.setup(t)
				got, raw := kill(t, fe, id, sc.req)
				// The status the front end reported, in its words,
				// must name the job's status as stored.
				j, err := c.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if got.Err == "" && got.Status != "" { // a signal's result may not say
					if words, ok := statusWords[fe]; ok {
						if !slices.Contains(words[got.Status], string(j.Status)) {
							t.Errorf("%s: %s reported status %q for a job that is %s", sc.name, fe, got.Status, j.Status)
						}
					} else if got.Status != string(j.Status) {
						t.Errorf("%s: %s reported status %q for a job that is %s", sc.name, fe, got.Status, j.Status)
					}
				}
				got.Status = string(j.Status)
				if got.Status != sc.want.Status && sc.want.Status == "killed" {
					// The kill returned before the stored status
					// changed: only the tmux path does that; wait.
					got.Status = string(w.waitTerminal(id, 30*time.Second).Status)
				}
				ended := len(procs) > 0
				if sc.want.Ended {
					waitFor(t, 30*time.Second, "the scenario's processes to end", func() bool {
						for _, p := range procs {
							if !goneOrZombie(p.pid, p.start) {
								return false
							}
						}
						return true
					})
				}
				for _, p := range procs {
					ended = ended && goneOrZombie(p.pid, p.start)
				}
				got.Ended = ended
				if got != sc.want {
					t.Errorf("%s through %s = %+v, want %+v\n%s", sc.name, fe, got, sc.want, raw)
				}
				fields += 8
				runs++
				// Leave nothing of the scenario running.
				if !j.Status.Terminal() {
					_, _ = c.Kill(ctx, id, vocab.NoGrace)
				}
			}
		})
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d scenarios, %d kills through 5 front ends, %d fields compared", len(scenarios), runs, fields))
}

// viewOf reads a kill result given as JSON: the pid lists, and the named
// fields for already done, escalated, the signal and the status.
func viewOf(m map[string]any, done, escalated, signal, status string) killView {
	count := func(k string) int {
		a, _ := m[k].([]any)
		return len(a)
	}
	v := killView{Signalled: count("signalled"), Survivors: count("survivors")}
	v.AlreadyDone, _ = m[done].(bool)
	v.Escalated, _ = m[escalated].(bool)
	v.Signal, _ = m[signal].(string)
	v.Status, _ = m[status].(string)
	return v
}
