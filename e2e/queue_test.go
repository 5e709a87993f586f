package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// enqueue starts a job that may wait and returns its id: stdout has the
// id alone, as for any start, and stderr at most the note that says it
// waits.
func (w *world) enqueue(args ...string) string {
	w.t.Helper()
	r := w.jobs(append([]string{"start"}, args...)...)
	if r.code != 0 || (r.stderr != "" && !strings.Contains(r.stderr, "queued")) || strings.Count(r.stderr, "\n") > 1 {
		w.t.Fatalf("%v", r)
	}
	return strings.TrimSpace(r.stdout)
}

// transitionRow is one status transition of the world's database, in the
// order the events were written.
type transitionRow struct {
	job, from, to string
}

// transitions reads every transition event of the world's database in
// order. The claim of a queued job and the counts it was decided on are
// one transaction, so this order is the order things happened in.
func (w *world) transitions() []transitionRow {
	w.t.Helper()
	rows, err := w.sqlDB().QueryContext(context.Background(),
		`SELECT job_id, coalesce(from_status, ''), to_status FROM events WHERE kind = 'transition' ORDER BY id`)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var out []transitionRow
	for rows.Next() {
		var r transitionRow
		if err := rows.Scan(&r.job, &r.from, &r.to); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// checkQueueRun checks, from the audit trail, that the jobs ids of one
// queue started in their order, each exactly once, and that no more than
// parallel of them were starting or running at any moment.
func checkQueueRun(t *testing.T, trail []transitionRow, ids []string, parallel int) {
	t.Helper()
	in := map[string]bool{}
	for _, id := range ids {
		in[id] = true
	}
	var started []string
	active, most := 0, 0
	for _, r := range trail {
		if !in[r.job] {
			continue
		}
		switch {
		case r.from == "queued" && r.to == "starting":
			started = append(started, r.job)
			active++
			most = max(most, active)
		case (r.from == "starting" || r.from == "running") && r.to != "running":
			active--
		}
	}
	if most > parallel {
		t.Errorf("%d jobs of a queue of parallel %d ran at once", most, parallel)
	}
	if len(started) != len(ids) {
		t.Fatalf("%d starts of %d queued jobs (a job started twice, or never)", len(started), len(ids))
	}
	for i := range ids {
		if started[i] != ids[i] {
			t.Fatalf("start %d was job %s, want %s (queued in that order)", i, started[i], ids[i])
		}
	}
}

// A queue of parallel 2 runs everything it is given, never more than two
// at once, in the order the jobs were queued (JOBS_E2E_QUEUE_JOBS jobs, 24
// unless set; the figure is 100).
func TestQueueParallelTwoKeepsOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	n := int(envInt64("JOBS_E2E_QUEUE_JOBS", 24))
	w.ok("queue", "builds", "--parallel", "2")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = w.enqueue("--queue", "builds", fmt.Sprintf("sleep 0.05; echo job %d", i))
	}
	waitFor(t, 120*time.Second, "every queued job to end", func() bool {
		out := w.ok("list", "--status", "active", "--all")
		return !strings.Contains(out, "queued") && !strings.Contains(out, "running") && !strings.Contains(out, "starting")
	})
	for i, id := range ids {
		j, _ := w.status(id)
		if j.Status != "done" {
			t.Fatalf("job %d (%s) is %s, want done", i, id, j.Status)
		}
	}
	checkQueueRun(t, w.transitions(), ids, 2)
	if out := w.ok("queue"); !strings.Contains(out, "builds") || !strings.Contains(out, "2         0        0") {
		t.Errorf("jobs queue after the run:\n%s", out)
	}
}

// The supervisor SIGKILLed with 5 jobs of a queue running and 20 waiting:
// the next supervisor marks the 5 lost and starts the 20 in their order,
// each once.
func TestQueueSurvivesSupervisorCrash(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.ok("queue", "q", "--parallel", "5")
	var long, waiting []string
	for i := 0; i < 5; i++ {
		long = append(long, w.enqueue("--queue", "q", "sleep 600"))
	}
	for i := 0; i < 20; i++ {
		waiting = append(waiting, w.enqueue("--queue", "q", fmt.Sprintf("echo waited %d", i)))
	}
	waitFor(t, 30*time.Second, "the five long jobs to run", func() bool {
		for _, id := range long {
			if j, _ := w.status(id); j.Status != "running" {
				return false
			}
		}
		return true
	})
	t.Cleanup(func() {
		for _, id := range long {
			w.jobs("kill", id) // ends what a lost job left running
		}
	})
	for _, id := range waiting {
		if j, _ := w.status(id); j.Status != "queued" {
			t.Fatalf("job %s is %s behind five running jobs of a queue of five, want queued", id, j.Status)
		}
	}
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the killed supervisor's lock to be free", func() bool { return lockFree(lock) })
	for _, id := range waiting {
		if j, _ := w.status(id); j.Status != "queued" {
			t.Fatalf("job %s is %s after the crash, want still queued", id, j.Status)
		}
	}

	// Any start brings up a supervisor, which takes the queue over.
	w.start("true")
	waitFor(t, 60*time.Second, "the twenty queued jobs to end", func() bool {
		for _, id := range waiting {
			if j, _ := w.status(id); j.Status != "done" {
				return false
			}
		}
		return true
	})
	for _, id := range long {
		if j, _ := w.status(id); j.Status != "lost" {
			t.Errorf("long job %s is %s after the crash, want lost", id, j.Status)
		}
	}
	trail := w.transitions()
	checkQueueRun(t, trail, append(append([]string{}, long...), waiting...), 5)
	for _, id := range waiting {
		runs := 0
		for _, r := range trail {
			if r.job == id && r.to == "running" {
				runs++
			}
		}
		if runs != 1 {
			t.Errorf("job %s ran %d times, want once", id, runs)
		}
	}
	w.integrity()
}

// A chain of three whose middle link fails: with --after-ok the last one
// fails, naming the dependency; with --after it runs.
func TestDependencyChainWithFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// fetch ends when told to (a line on its stdin): the others are all
	// queued behind it by then, however slow the machine.
	first := w.start("--name", "fetch", "read go; echo fetched")
	middle := w.enqueue("--name", "build", "--after-ok", "fetch", "echo building; exit 3")
	strict := w.enqueue("--name", "deploy", "--after-ok", "build", "echo deployed")
	loose := w.enqueue("--name", "report", "--after", "build", "echo reported")
	for _, id := range []string{middle, strict, loose} {
		if j, _ := w.status(id); j.Status != "queued" {
			t.Fatalf("job %s is %s while what it comes after runs, want queued", id, j.Status)
		}
	}
	w.ok("write", "--eof", "--newline", first, "go")
	waitFor(t, 60*time.Second, "the chain to end", func() bool {
		for _, id := range []string{first, middle, strict, loose} {
			if j, _ := w.status(id); !terminal(j.Status) {
				return false
			}
		}
		return true
	})
	check := func(id, status, reason string) {
		t.Helper()
		j, _ := w.status(id)
		if j.Status != status || !strings.Contains(j.Reason, reason) {
			t.Errorf("job %s: %s (%q), want %s with reason containing %q", id, j.Status, j.Reason, status, reason)
		}
	}
	check(first, "done", "")
	check(middle, "failed", "")
	check(strict, "failed", "dependency "+middle+" failed")
	check(loose, "done", "")
	if got := w.ok("log", loose); !strings.Contains(got, "reported") {
		t.Errorf("the --after job's output: %q", got)
	}
	if out := w.ok("list", "--all"); !strings.Contains(out, "dependency "+middle+" failed") {
		t.Errorf("list does not say why the --after-ok job failed:\n%s", out)
	}

	// A wait on itself, or on a job of no scope of ours, is refused.
	if r := w.jobs("start", "--after", "nosuchjob", "true"); r.code == 0 || !strings.Contains(r.stderr, "not found") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("start after a missing job: %v", r)
	}
	// A tmux job starts at once or not at all.
	if r := w.jobs("start", "--tmux", "--after", first, "true"); r.code == 0 || !strings.Contains(r.stderr, "tmux job cannot wait") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a tmux job after another: %v", r)
	}
}

func terminal(status string) bool {
	switch status {
	case "done", "failed", "killed", "timed_out", "lost":
		return true
	}
	return false
}

// restartView is the part of a job restart compares.
type restartView struct {
	job
	Name          string   `json:"name"`
	Command       string   `json:"command"`
	Argv          []string `json:"argv"`
	Cwd           string   `json:"cwd"`
	RestartedFrom string   `json:"restarted_from"`
}

func (w *world) restartView(id string) restartView {
	w.t.Helper()
	var s struct {
		Job restartView `json:"job"`
	}
	if err := json.Unmarshal([]byte(w.ok("--json", "status", id)), &s); err != nil {
		w.t.Fatal(err)
	}
	return s.Job
}

// jobs restart of a failed job starts a new one like it: same command,
// argv, directory, name and the variables it added (their values taken
// from the restarting environment); the new job records the old one, and
// the old one keeps its history. Flags given to restart override.
func TestRestartFailedJobCLI(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.extra = append(w.extra, "GREETING=hello")
	old := w.start("--name", "flaky", "--cwd", w.base, "--env", "GREETING", "echo $GREETING from $(pwd); exit 4")
	w.jobs("wait", old)
	o := w.restartView(old)
	if o.Status != "failed" {
		t.Fatalf("the old job is %s, want failed", o.Status)
	}
	_, oldEvents := w.status(old)

	id := strings.TrimSpace(w.ok("restart", "flaky"))
	w.jobs("wait", id)
	n := w.restartView(id)
	if n.ID == old || n.RestartedFrom != old {
		t.Fatalf("restarted job %s records restarted_from %q, want %s", n.ID, n.RestartedFrom, old)
	}
	if n.Name != o.Name || n.Command != o.Command || strings.Join(n.Argv, "\x00") != strings.Join(o.Argv, "\x00") || n.Cwd != o.Cwd ||
		strings.Join(n.EnvNames, ",") != strings.Join(o.EnvNames, ",") {
		t.Errorf("restarted job differs:\nold %+v\nnew %+v", o, n)
	}
	if n.Status != "failed" || n.ExitCode == nil || *n.ExitCode != 4 {
		t.Errorf("restarted job: %s exit %v, want failed exit 4", n.Status, n.ExitCode)
	}
	if got := w.ok("log", id); !strings.Contains(got, "hello from "+w.base) {
		t.Errorf("restarted job's output %q, want the greeting from its directory", got)
	}
	if _, ev := w.status(old); len(ev) != len(oldEvents) {
		t.Errorf("the old job's history changed: %d events, was %d", len(ev), len(oldEvents))
	}

	// Flags given override: another name here.
	id2 := strings.TrimSpace(w.ok("restart", old, "--name", "flaky2"))
	if v := w.restartView(id2); v.Name != "flaky2" || v.RestartedFrom != old {
		t.Errorf("restart --name: name %q restarted_from %q", v.Name, v.RestartedFrom)
	}
	if r := w.jobs("restart", "nosuchjob"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("restart of a missing job: %v", r)
	}
}

// process action=restart over MCP does what jobs restart does, and
// execute_command queues a job given a queue and after.
func TestRestartAndQueueMCP(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cs := w.mcp()
	text, isErr := mcpCall(t, cs, "execute_command", map[string]any{"command": "echo once; exit 5", "name": "mflaky", "yieldMs": 20000})
	if isErr || !strings.Contains(text, "exit 5") {
		t.Fatalf("execute_command: %v %s", isErr, text)
	}
	old := w.restartView("mflaky")
	text, isErr = mcpCall(t, cs, "process", map[string]any{"action": "restart", "sessionId": "mflaky"})
	if isErr {
		t.Fatalf("process restart: %s", text)
	}
	var newID string
	waitFor(t, 30*time.Second, "the restarted job to end", func() bool {
		j := w.restartView("mflaky")
		newID = j.ID
		return j.ID != old.ID && terminal(j.Status)
	})
	n := w.restartView(newID)
	if n.RestartedFrom != old.ID || n.Command != old.Command || n.ExitCode == nil || *n.ExitCode != 5 {
		t.Errorf("restarted over MCP: %+v, want restarted_from %s, the same command, exit 5", n, old.ID)
	}

	// A queue and a dependency through execute_command.
	w.ok("queue", "mq", "--pause")
	text, isErr = mcpCall(t, cs, "execute_command", map[string]any{"command": "echo queued", "queue": "mq", "after": []string{"mflaky"}, "yieldMs": 0, "background": true})
	if isErr || !strings.Contains(text, "queued") {
		t.Fatalf("execute_command with a queue: %v %s", isErr, text)
	}
	text, _ = mcpCall(t, cs, "process", map[string]any{"action": "list", "status": "active"})
	if !strings.Contains(text, "queued #1 in queue mq") {
		t.Errorf("list does not show the queue and position:\n%s", text)
	}
	var page struct {
		Jobs []job `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(w.ok("--json", "list", "--status", "queued")), &page); err != nil || len(page.Jobs) != 1 {
		t.Fatalf("queued jobs: %v %+v", err, page)
	}
	qid := page.Jobs[0].ID
	w.ok("queue", "mq", "--resume")
	text, isErr = mcpCall(t, cs, "process", map[string]any{"action": "wait", "sessionId": qid, "timeout": 30})
	if isErr {
		t.Fatalf("wait on the queued job: %s", text)
	}
	if j, _ := w.status(qid); j.Status != "done" {
		t.Errorf("the queued job is %s after wait, want done; wait said: %s", j.Status, text)
	}
}

// The job page's Restart button (--allow-control) starts a new job like
// the failed one and opens it; the read-only view has no such button.
func TestUIRestartButton(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	old := w.start("--name", "uiflaky", "echo try; exit 6")
	w.jobs("wait", old)

	ctx := browser(t)
	ro := w.ui()
	run(t, ctx, "the read-only job page", chromedp.Navigate(ro+"job/"+old), visible(`#log`))
	if eval[int](t, ctx, `document.querySelectorAll("#restart").length`) != 0 {
		t.Fatal("the read-only view shows a restart button")
	}
	u := w.ui("--allow-control")
	run(t, ctx, "the job page with control", chromedp.Navigate(u+"job/"+old), visible(`#restart`))
	run(t, ctx, "click restart", chromedp.Click(chromedp.CSS(`#restart`)))
	var newID string
	waitFor(t, 30*time.Second, "a job restarted from the old one", func() bool {
		j := w.restartView("uiflaky")
		newID = j.ID
		return j.ID != old && j.RestartedFrom == old
	})
	// The page navigates: a look during the navigation finds no page to
	// evaluate in, so looks that fail are retried.
	waitFor(t, 30*time.Second, "the page to open the new job", func() bool {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		loc, err := chromedp.Run(lctx, chromedp.Evaluate[string](`location.pathname`))
		return err == nil && strings.HasSuffix(loc, "/job/"+newID)
	})
	w.jobs("wait", newID)
	if n := w.restartView(newID); n.Status != "failed" || n.ExitCode == nil || *n.ExitCode != 6 || n.Name != "uiflaky" {
		t.Errorf("the restarted job: %+v", n)
	}
}

// The 51st running job of a scope waits instead of being refused, and its
// start says why; --no-queue asks for the refusal.
func TestScopeCapQueuesTheFiftyFirst(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	t.Cleanup(func() { w.jobs("kill", "--all") })
	var first string
	for i := 0; i < 50; i++ {
		id := w.start("--no-stdin", "sleep 600")
		if i == 0 {
			first = id
		}
	}
	r := w.jobs("start", "echo after the cap")
	if r.code != 0 || !strings.Contains(r.stderr, "running cap") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("the 51st start: %v", r)
	}
	late := strings.TrimSpace(r.stdout)
	if j, _ := w.status(late); j.Status != "queued" {
		t.Fatalf("the 51st job is %s, want queued", j.Status)
	}
	if r := w.jobs("start", "--no-queue", "true"); r.code != 1 || !strings.Contains(r.stderr, "too many running jobs") {
		t.Fatalf("a --no-queue start past the cap: %v", r)
	}
	w.ok("kill", first)
	waitFor(t, 30*time.Second, "the queued job to run once there is room", func() bool {
		j, _ := w.status(late)
		return j.Status == "done"
	})
}

// TestQueuedEnvironmentNeverStored: a queued job's environment values (the
// caller's environment and --env) stay in the memory of the supervisor
// that queued it, never in the database: no file of the database holds
// them while the job waits, and the job still runs with them. A job
// taken over after that supervisor's crash cannot have its --env values:
// it fails, saying why, instead of running without them.
func TestQueuedEnvironmentNeverStored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.extra = append(w.extra, "QUEUE_CALLER_TOKEN=caller-d41d8cd9")
	w.ok("queue", "q", "--parallel", "1")
	blocker := w.enqueue("--queue", "q", "sleep 600")
	secret := w.enqueue("--queue", "q", "--env", "QUEUE_SECRET=hunter2-9f86d081", `echo "$QUEUE_SECRET $QUEUE_CALLER_TOKEN"`)
	waitFor(t, 30*time.Second, "the blocker to run", func() bool {
		j, _ := w.status(blocker)
		return j.Status == "running"
	})
	if j, _ := w.status(secret); j.Status != "queued" {
		t.Fatalf("job behind the blocker is %s, want queued", j.Status)
	}
	for _, value := range []string{"hunter2-9f86d081", "caller-d41d8cd9"} {
		if f := filesHolding(t, filepath.Dir(w.dbPath()), value); len(f) > 0 {
			t.Errorf("the value %q of a queued job's environment is stored in %v", value, f)
		}
	}
	w.ok("kill", blocker)
	if j := w.waitTerminal(secret, 60*time.Second); j.Status != "done" {
		t.Fatalf("queued job ended %s", j.Status)
	}
	if out := w.ok("log", secret); out != "hunter2-9f86d081 caller-d41d8cd9\n" {
		t.Errorf("the queued job ran with %q, want its --env value and the caller's environment", out)
	}

	// Queued with --env by a supervisor that then dies.
	blocker = w.enqueue("--queue", "q", "sleep 600")
	waitFor(t, 30*time.Second, "the second blocker to run", func() bool {
		j, _ := w.status(blocker)
		return j.Status == "running"
	})
	t.Cleanup(func() { w.jobs("kill", blocker) })
	orphan := w.enqueue("--queue", "q", "--env", "QUEUE_SECRET=hunter2-9f86d081", `echo "$QUEUE_SECRET"`)
	plain := w.enqueue("--queue", "q", "echo plain")
	sup := w.supervisorPID()
	lock := w.supervisorLock(sup)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the killed supervisor's lock to be free", func() bool { return lockFree(lock) })
	w.start("true") // a new supervisor takes the queue over
	j := w.waitTerminal(orphan, 60*time.Second)
	if j.Status != "failed" || !strings.Contains(j.Reason, "QUEUE_SECRET") || !strings.Contains(j.Reason, "never stored") {
		t.Errorf("job queued with --env by a supervisor that died: %s (%q), want failed saying its values were never stored", j.Status, j.Reason)
	}
	if j := w.waitTerminal(plain, 60*time.Second); j.Status != "done" {
		t.Errorf("job queued without --env after the crash: %s, want done", j.Status)
	}
}

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(s)) {
			found = append(found, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
