package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/db/dbtest"
	"github.com/jmoiron/sqlx"
)

// historyScope is the scope whose history the history workload grows.
const historyScope = "bench"

// history: every everyday verb timed against a database holding 1,000
// finished jobs and against one holding historyJobs (historyEvents events
// and one chunk each, kept forever), in the same run, runs interleaved.
// With --against, the previous build does the same on its own two
// databases (it cannot open a newer schema), in the same run. Targets:
// every ratio at most 1.5, default list at most 50 rows.
func (b *bench) history(ctx context.Context) error {
	label := fmt.Sprintf("history: 1,000 vs %s finished jobs, %s events", thousands(b.cfg.historyJobs),
		thousands(b.cfg.historyJobs*b.cfg.historyEvents))
	bins := []struct{ bin, suffix, label string }{{b.cfg.jobsBin, "", label}}
	if b.cfg.baseBin != "" {
		bins = append(bins, struct{ bin, suffix, label string }{b.cfg.baseBin, "-base", label + ", " + b.cfg.baseRev})
	}
	for _, x := range bins {
		small, err := b.historyWorld(ctx, "history-1k"+x.suffix, x.bin, 1000)
		if err != nil {
			return err
		}
		big, err := b.historyWorld(ctx, "history-big"+x.suffix, x.bin, b.cfg.historyJobs)
		if err != nil {
			return err
		}
		if err := b.compareWorlds(ctx, x.label, small, big, true); err != nil {
			return err
		}
	}
	return nil
}

// running: start, poll, list and wait with one running job against 199
// (the default total limit is 200: the measured start is the 200th).
// With --against, the previous build's pair of worlds runs at the same
// time and is measured right after, so that both see the same load.
func (b *bench) running(ctx context.Context) error {
	type pair struct {
		one, many *histWorld
		label     string
	}
	var pairs []pair
	for _, x := range []struct{ bin, suffix, label string }{{b.cfg.jobsBin, "", ""}, {b.cfg.baseBin, "-base", ", " + b.cfg.baseRev}} {
		if x.bin == "" {
			continue
		}
		one, err := b.runningWorld(ctx, "running-1"+x.suffix, x.bin, 1)
		if err != nil {
			return err
		}
		many, err := b.runningWorld(ctx, "running-199"+x.suffix, x.bin, 199)
		if err != nil {
			return err
		}
		pairs = append(pairs, pair{one, many, "running: 1 vs 199 running jobs" + x.label})
	}
	for _, p := range pairs {
		if err := b.compareWorlds(ctx, p.label, p.one, p.many, false); err != nil {
			return err
		}
	}
	return nil
}

// expiry: the database's size while historyExpire jobs are created and
// expired (historySize), then how long a writer waits while the janitor
// expires historyExpire jobs at once (expiryStall).
func (b *bench) expiry(ctx context.Context) error {
	if err := b.historySize(ctx); err != nil {
		return err
	}
	if err := b.expiryStall(ctx, b.cfg.jobsBin, ""); err != nil {
		return err
	}
	if b.cfg.baseBin != "" {
		return b.expiryStall(ctx, b.cfg.baseBin, ", "+b.cfg.baseRev)
	}
	return nil
}

// histWorld is a world prepared for the history workload: a finished job
// to read (id) and the newest event id (last).
type histWorld struct {
	*world
	size int // jobs in its history, or running
	id   string
	last string
	mcp  *mcpSession
}

// historyWorld fills a fresh world of the jobs binary bin with n finished
// jobs through SQL, then runs one real job through the CLI (which starts
// the supervisor) and keeps an MCP server open on it. The binary creates
// the database first, so that it has the schema that binary writes.
func (b *bench) historyWorld(ctx context.Context, name, bin string, n int) (*histWorld, error) {
	w, err := b.newWorldOf(name, bin)
	if err != nil {
		return nil, err
	}
	if _, err := w.jobs(historyScope, "gc"); err != nil {
		return nil, err
	}
	d, err := sqlx.Open("sqlite", db.DSN(w.db))
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	err = dbtest.Fill(ctx, d, dbtest.History{Scope: historyScope, Jobs: n, ChunkBytes: 100,
		Events: b.cfg.historyEvents, End: time.Now().Add(-time.Hour)})
	d.Close()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "   %s: %d jobs, %d events written in %.1f s (%.0f MiB)\n", name, n, n*b.cfg.historyEvents,
		time.Since(t0).Seconds(), mib(fileSize(w.db)))
	return b.prepareHistWorld(ctx, w, n)
}

func (b *bench) prepareHistWorld(ctx context.Context, w *world, n int) (*histWorld, error) {
	id, err := w.start(historyScope, "--ttl", "0", "seq 1 1000")
	if err != nil {
		return nil, err
	}
	if _, err := w.jobs(historyScope, "wait", id); err != nil {
		return nil, err
	}
	// Its end is the scope's newest event; the whole scope's would be a
	// million lines.
	out, err := w.jobs(historyScope, "events", "--job", id)
	if err != nil {
		return nil, err
	}
	var ev struct {
		ID int64 `json:"id"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &ev); err != nil {
		return nil, fmt.Errorf("read the newest event: %w", err)
	}
	hw := &histWorld{world: w, size: n, id: id, last: strconv.FormatInt(ev.ID, 10)}
	if hw.mcp, err = startMCP(w, historyScope); err != nil {
		return nil, err
	}
	b.cleanups = append(b.cleanups, hw.mcp.close)
	return hw, nil
}

// runningWorld is a world with n running jobs: up to 40 in the measured
// scope, the rest in other scopes of 40 (a scope may run 50).
func (b *bench) runningWorld(ctx context.Context, name, bin string, n int) (*histWorld, error) {
	w, err := b.newWorldOf(name, bin)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		scope := historyScope
		if i >= 40 {
			scope = fmt.Sprintf("other%d", i/40)
		}
		if _, err := w.start(scope, "--timeout", "0", "--", b.self, "sleeper"); err != nil {
			return nil, err
		}
	}
	b.cleanups = append(b.cleanups, func() {
		for _, s := range []string{historyScope, "other1", "other2", "other3", "other4"} {
			_, _ = w.jobs(s, "kill", "--all")
		}
	})
	return b.prepareHistWorld(ctx, w, n)
}

// verb is one timed command of the history workload; cmd returns the time
// it took.
type verb struct {
	name string
	cmd  func(w *histWorld) (time.Duration, error)
}

func (b *bench) historyVerbs() []verb {
	cli := func(args ...string) func(w *histWorld) (time.Duration, error) {
		return func(w *histWorld) (time.Duration, error) {
			a := make([]string, len(args))
			for i, s := range args {
				a[i] = strings.NewReplacer("ID", w.id, "LAST", w.last).Replace(s)
			}
			return timedOut(w.cmd(historyScope, a...))
		}
	}
	mcp := func(args map[string]any) func(w *histWorld) (time.Duration, error) {
		return func(w *histWorld) (time.Duration, error) {
			if args["sessionId"] != nil {
				args["sessionId"] = w.id
			}
			t0 := time.Now()
			err := w.mcp.call("process", args)
			return time.Since(t0), err
		}
	}
	return []verb{
		{"`poll ID`", cli("poll", "ID")},
		{"`poll --new ID`", cli("poll", "--new", "ID")},
		{"`log ID` (64 KiB page)", cli("log", "--offset", "0", "--limit", "65536", "ID")},
		{"`status ID`", cli("status", "ID")},
		{"`wait ID` (finished)", cli("wait", "ID")},
		{"`events --since LAST`", cli("events", "--since", "LAST")},
		{"`gc`", cli("gc")},
		{"`list`", cli("list")},
		// The started job is waited for outside the timing, so that the
		// running worlds stay below the limit.
		{"`start true` (warm supervisor)", func(w *histWorld) (time.Duration, error) {
			c := w.cmd(historyScope, "start", "--ttl", "1h", "true")
			var out strings.Builder
			c.Stdout = &out
			d, err := timed(c)
			if err != nil {
				return d, err
			}
			_, err = w.jobs(historyScope, "wait", strings.TrimSpace(out.String()))
			return d, err
		}},
		{"MCP `process list`", mcp(map[string]any{"action": "list"})},
		{"MCP `process poll`", mcp(map[string]any{"action": "poll", "sessionId": ""})},
		{"MCP `process status`", mcp(map[string]any{"action": "status", "sessionId": ""})},
		{"`list --all-scopes`", cli("list", "--all-scopes")},
	}
}

// compareWorlds times every verb in a and in b, alternating, and adds a row
// per verb with the ratio b / a. With history set it also counts the rows
// default list prints.
func (b *bench) compareWorlds(ctx context.Context, label string, a, z *histWorld, history bool) error {
	verbs := b.historyVerbs()
	if !history {
		verbs = []verb{verbs[0], verbs[4], verbs[7], verbs[8]} // poll, wait, list, start
	}
	ds := make([][2][]time.Duration, len(verbs))
	loadBefore := loadavg()
	for run := 0; run < b.cfg.historyRuns; run++ {
		for i, v := range verbs {
			for k, w := range []*histWorld{a, z} {
				if run%2 == 1 {
					w = []*histWorld{z, a}[k]
					k = 1 - k
				}
				d, err := v.cmd(w)
				if err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				ds[i][k] = append(ds[i][k], d)
			}
		}
	}
	b.add(row{workload: label, metric: "load average (1, 5, 15 min) before / after the timing", jobs: loadBefore + " / " + loadavg()})
	for i, v := range verbs {
		ma, mz := median(ds[i][0]), median(ds[i][1])
		r := float64(mz) / float64(ma)
		b.add(row{workload: label, metric: v.name, jobs: fmt.Sprintf("%s / %s", ms(ma), ms(mz)),
			ratio: fmt.Sprintf("%.2f", r), target: "≤ 1.5", ok: yes(r <= 1.5)})
	}
	if history {
		for _, w := range []*histWorld{a, z} {
			out, err := w.jobs(historyScope, "list")
			if err != nil {
				return err
			}
			n := strings.Count(string(out), "\n")
			b.add(row{workload: label, metric: fmt.Sprintf("default `list` lines printed (%s jobs)", thousands(w.size)),
				jobs: strconv.Itoa(n), target: "≤ 52 (50 rows, header, more)", ok: yes(n <= 52)})
		}
	}
	return nil
}

// historySize creates and expires historyExpire jobs of 10 KiB output each
// in ten rounds, running the janitor (`jobs gc`) after each, and compares
// the size of the database (with its WAL) once the last round's jobs are
// written with its size once the first round's were: expired jobs' pages
// must be reused.
func (b *bench) historySize(ctx context.Context) error {
	w, err := b.newWorld("history-size")
	if err != nil {
		return err
	}
	defer os.RemoveAll(w.dir)
	d, err := db.Open(ctx, w.db)
	if err != nil {
		return err
	}
	defer d.Close()
	per := max(1, b.cfg.historyExpire/10)
	var first, last int64
	var gcTime time.Duration
	for round := 0; round < 10; round++ {
		err = dbtest.Fill(ctx, d, dbtest.History{Scope: historyScope, Jobs: per, ChunkBytes: 10 << 10,
			TTL: time.Millisecond, End: time.Now().Add(-time.Minute)})
		if err != nil {
			return err
		}
		if _, err := d.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return err
		}
		size := fileSize(w.db) + fileSize(w.db+"-wal")
		if round == 0 {
			first = size
		}
		last = size
		t0 := time.Now()
		if _, err := w.jobs(historyScope, "gc"); err != nil {
			return err
		}
		gcTime += time.Since(t0)
	}
	// The supervisor's checkpointer copies the WAL back after a janitor
	// pass; without a supervisor here, checkpoint as it would.
	if _, err := d.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	after, afterWAL := fileSize(w.db), fileSize(w.db+"-wal")
	r := float64(last) / float64(first)
	wl := fmt.Sprintf("history: %s jobs × 10 KiB created and expired in 10 rounds", thousands(per*10))
	b.add(row{workload: wl, metric: fmt.Sprintf("database size with the last round's jobs / with the first's (%s jobs)", thousands(per)),
		jobs: fmt.Sprintf("%.1f MiB / %.1f MiB", mib(last), mib(first)), ratio: fmt.Sprintf("%.2f", r), target: "≤ 1.5", ok: yes(r <= 1.5)})
	b.add(row{workload: wl, metric: fmt.Sprintf("database size after the last expiry: file + WAL (`jobs gc` %.1f s in all)", gcTime.Seconds()),
		jobs: fmt.Sprintf("%.1f MiB + %.1f MiB", mib(after), mib(afterWAL))})
	return nil
}

// expiryStall: historyExpire jobs of 10 KiB output each, all expired, are
// deleted by one `jobs gc` while a writer (another connection, as a
// supervisor recording output and statuses) adds a small event every
// 5 ms; after that the same writer runs as long with no janitor. The
// longest wait of a write in each is reported: the janitor must never keep
// a writer waiting more than 50 ms. bin is the jobs binary that runs the
// janitor (with --against, the previous build's on a database of its
// own, after this build's).
func (b *bench) expiryStall(ctx context.Context, bin, suffix string) error {
	w, err := b.newWorldOf("history-expiry"+strings.ReplaceAll(suffix, ", ", "-"), bin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(w.dir)
	d, err := db.Open(ctx, w.db)
	if err != nil {
		return err
	}
	defer d.Close()
	n := b.cfg.historyExpire
	t0 := time.Now()
	if err := dbtest.Fill(ctx, d, dbtest.History{Scope: historyScope, Jobs: n, ChunkBytes: 10 << 10,
		TTL: time.Millisecond, End: time.Now().Add(-time.Minute)}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "   history-expiry: %d jobs × 10 KiB written in %.1f s (%.0f MiB)\n", n, time.Since(t0).Seconds(), mib(fileSize(w.db)))

	// The janitor's run, with the writer.
	wr := startWriter(ctx, d)
	t0 = time.Now()
	_, gcErr := w.jobs(historyScope, "gc")
	gcTime := time.Since(t0)
	during := wr.stop()
	if gcErr != nil {
		return gcErr
	}
	var left int
	if err := d.GetContext(ctx, &left, `SELECT count(*) FROM jobs WHERE scope = ?`, historyScope); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("jobs gc left %d of %d expired jobs", left, n)
	}
	// The same writer as long with no janitor: its waits are the disk's,
	// SQLite's and the machine's own. As long, so that the two windows
	// have the same chance to meet a stall of a loaded machine.
	wr = startWriter(ctx, d)
	t := time.NewTimer(gcTime)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	alone := wr.stop()

	wl := fmt.Sprintf("history: %s expired jobs × 10 KiB deleted by one `jobs gc` (%.1f s, load average %s)%s", thousands(n), gcTime.Seconds(), loadavg(), suffix)
	b.add(row{workload: wl, metric: fmt.Sprintf("longest wait of a write, one every 5 ms: during the janitor (%d writes) vs no janitor (%d writes)", during.writes, alone.writes),
		jobs: ms(during.worst), baseline: ms(alone.worst), ratio: fmt.Sprintf("%.2f", float64(during.worst)/float64(max(alone.worst, time.Microsecond))),
		target: "≤ 50 ms", ok: yes(during.worst <= 50*time.Millisecond)})
	b.add(row{workload: wl, metric: "writes that waited more than 50 ms: during the janitor vs no janitor",
		jobs: strconv.Itoa(during.slow), baseline: strconv.Itoa(alone.slow)})
	b.add(row{workload: wl, metric: "median wait of a write: during the janitor vs no janitor",
		jobs: ms(during.median), baseline: ms(alone.median), ratio: fmt.Sprintf("%.2f", float64(during.median)/float64(max(alone.median, time.Microsecond)))})
	return nil
}

// writer adds a small event every 5 ms through its own connection and
// keeps how long each write took.
type writer struct {
	done chan struct{}
	res  chan writerResult
}

type writerResult struct {
	worst, median time.Duration
	writes, slow  int // slow: writes that waited more than 50 ms
}

func startWriter(ctx context.Context, d *db.DB) *writer {
	wr := &writer{done: make(chan struct{}), res: make(chan writerResult, 1)}
	go func() { // owned by wr: stopped by stop, which reads its result
		var waits []time.Duration
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wr.done:
				r := writerResult{writes: len(waits)}
				if len(waits) > 0 {
					r.worst, r.median = slices.Max(waits), median(waits)
				}
				for _, w := range waits {
					if w > 50*time.Millisecond {
						r.slow++
					}
				}
				wr.res <- r
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if _, err := d.AddEvent(ctx, db.Event{JobID: "writer", Scope: "writer", Kind: "note"}); err == nil {
				waits = append(waits, time.Since(t0))
			}
		}
	}()
	return wr
}

func (wr *writer) stop() writerResult {
	close(wr.done)
	return <-wr.res
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// timedOut runs c, discarding its stdout.
func timedOut(c *exec.Cmd) (time.Duration, error) {
	c.Stdout = io.Discard
	return timed(c)
}

// mcpSession is a `jobs mcp` server on stdio, initialised, for timing tool
// calls.
type mcpSession struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
}

func startMCP(w *world, scope string) (*mcpSession, error) {
	c := w.cmd(scope, "mcp")
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	s := &mcpSession{cmd: c, in: in, out: bufio.NewReaderSize(out, 1<<20), next: 1}
	if _, err := s.rpc("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "jobsbench", "version": "0"}}); err != nil {
		s.close()
		return nil, err
	}
	if _, err := fmt.Fprintln(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// rpc sends one request and reads lines until its response.
func (s *mcpSession) rpc(method string, params any) (json.RawMessage, error) {
	id := s.next
	s.next++
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if _, err := s.in.Write(append(req, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("mcp %s: %w", method, err)
		}
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || *m.ID != id {
			continue
		}
		if len(m.Error) > 0 {
			return nil, fmt.Errorf("mcp %s: %s", method, m.Error)
		}
		return m.Result, nil
	}
}

func (s *mcpSession) call(tool string, args map[string]any) error {
	res, err := s.rpc("tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.IsError {
		return fmt.Errorf("mcp %s %v: %s", tool, args, res)
	}
	return nil
}

func (s *mcpSession) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { // owned here: close waits for it or kills the server
		_ = s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}
