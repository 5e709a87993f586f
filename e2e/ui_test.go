package e2e

// Browser tests of `jobs ui`: the built binary serves a real database and a
// headless Chromium (Debian's chromium package) drives the pages through
// the DevTools protocol. Without a chromium binary they skip, except in CI
// (CI=true), where they fail: scripts/deps.sh installs it.
//
// Knobs: JOBS_E2E_UI_LOG_BYTES (default 1 GiB) is the size of the large
// log; JOBS_UI_SCREENSHOTS=1 writes docs/ui-list.png, docs/ui-job.png and
// docs/ui-timeline.png.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentjobs/jobs/internal/testlong"
	"github.com/agentjobs/jobs/internal/testwait"
)

// chromium finds a Chromium or Chrome binary, or skips the test (fails it in
// CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium binary: CI must run the browser tests (scripts/deps.sh installs Debian's chromium)")
	}
	t.Skip("no chromium binary on PATH: install Debian's chromium (scripts/deps.sh does) to run the browser tests")
	return ""
}

// browser returns a tab of its own for the test, in a browser context of
// its own (no cookies or storage shared with another test's tab), in the
// one headless Chromium the package's tests share: a browser costs about
// six seconds of CPU to start, a tab a fraction of that. The tab's
// context is bounded so a stuck page fails the test instead of hanging
// it; the tab closes with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	bctx, err := sharedBrowser.get(path)
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	tctx, cancelTab := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(tctx); err != nil {
		cancelTab()
		t.Fatalf("open a tab in %s: %v", path, err)
	}
	ctx, cancelTimeout := context.WithTimeout(tctx, 5*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
	})
	return ctx
}

// sharedBrowser is the Chromium the browser tests share, started by the
// first of them and ended by TestMain.
var sharedBrowser browserProcess

type browserProcess struct {
	mu     sync.Mutex
	ctx    context.Context // the browser's first tab; new tabs derive from it
	cancel func()
}

// get starts the browser on first use; a browser that failed to start
// is tried again by the next test.
func (b *browserProcess) get(path string) (context.Context, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx != nil {
		return b.ctx, nil
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	// The first action starts the browser, which lives as long as that
	// context: no timeout there, each test's tab gets its own.
	if err := chromedp.Do(bctx); err != nil {
		cancelCtx()
		cancelAlloc()
		return nil, err
	}
	b.ctx = bctx
	b.cancel = func() {
		cancelCtx()
		cancelAlloc()
	}
	return bctx, nil
}

// close ends the browser, if one was started.
func (b *browserProcess) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
		b.ctx, b.cancel = nil, nil
	}
}

// steps is a browser step that returns nothing.
type steps = chromedp.Action[chromedp.Void]

// run runs browser steps and fails the test on error.
func run(t *testing.T, ctx context.Context, what string, actions ...steps) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// uiPatience is the least a page is given to reach a state, as every wait
// of the tests (testwait.Least): beside the loaded race run and stress-ng,
// following a link and marking its line once took longer than 20 s.
const uiPatience = testwait.Least

// within bounds steps: a state the page must reach in d (uiPatience at
// least).
func within(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...steps) {
	t.Helper()
	d = max(d, uiPatience)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s (within %v): %v", what, d, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the visible text of the first element matching a CSS selector.
//
// The element is found and read in one evaluation: live parts of a page
// replace their nodes on every update, and a node found by one call
// (chromedp.Text's query) can be detached, and read as "", by the next.
// It waits up to uiPatience for a visible element to read.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	expr := `(() => { const e = document.querySelector(` + strconv.Quote(css) + `);
		return e && (e.offsetWidth || e.offsetHeight || e.getClientRects().length) ? [true, e.innerText] : [false, ""]; })()`
	var v string
	testwait.ForLast(t, uiPatience, "a visible "+css+" to read", func() (bool, string) {
		r, err := look[[]any](ctx, expr)
		if err != nil {
			return false, err.Error()
		}
		if len(r) == 2 && r[0] == true {
			v, _ = r[1].(string)
			return true, ""
		}
		return false, "no visible element"
	})
	return v
}

// settle waits for a JavaScript condition after a step that navigates:
// while the new page loads, an evaluation can fail for want of a page to
// run in (the navigation destroyed its context), and is tried again.
func settle(t *testing.T, ctx context.Context, d time.Duration, what, expr string) {
	t.Helper()
	waitFor(t, d, what, func() bool {
		v, err := look[bool](ctx, expr)
		return err == nil && v
	})
}

// look evaluates a JavaScript expression once, in the tab's current
// document, for at most 5 s: the one look of a wait that tries again.
func look[T any](ctx context.Context, expr string) (T, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(lctx, chromedp.Evaluate[T](expr))
}

// visible waits for an element matching a CSS selector to be visible.
func visible(css string) steps { return chromedp.WaitVisible(chromedp.CSS(css)) }

// until waits for a JavaScript condition to hold.
func until(expr string) steps { return chromedp.Poll[chromedp.Void](expr) }

func title(t *testing.T, ctx context.Context) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ui starts `jobs ui` in the world and returns the URL it printed. The
// server is ended when the test ends.
func (w *world) ui(args ...string) string {
	w.t.Helper()
	u, _ := w.uiProcess(args...)
	return u
}

// uiProcess is ui, and the server's pid.
func (w *world) uiProcess(args ...string) (string, int) {
	w.t.Helper()
	c := w.cmd(append([]string{"ui"}, args...)...)
	stdout, err := c.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "http://127.0.0.1:") {
			w.t.Fatalf("jobs ui printed %q, stderr %q", l, stderr.String())
		}
		return l, c.Process.Pid
	case <-time.After(30 * time.Second):
		w.t.Fatalf("jobs ui printed no URL in 30s; stderr %q", stderr.String())
	}
	return "", 0
}

// live waits until the page's event stream is connected.
func live(t *testing.T, ctx context.Context) {
	t.Helper()
	within(t, ctx, 15*time.Second, "event stream connected", visible(`#live.on`))
}

// TestUIListShowsJobStartedLater: the list page, once loaded, shows a job
// started afterwards, without reloading.
func TestUIListShowsJobStartedLater(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.start("--name", "before", "--", "true")
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the list", chromedp.Navigate(u), visible(`#rows`))
	eval[bool](t, ctx, `window.__sameDocument = true`)
	live(t, ctx)
	began := time.Now()
	id := w.start(append([]string{"--name", "came-later", "--timeout", "60s"}, helper("ready-idle")...)...)
	within(t, ctx, 15*time.Second, "the new job's row", visible(`tr[data-id="`+id+`"]`))
	took := time.Since(began)
	same := eval[bool](t, ctx, `window.__sameDocument === true`)
	name := text(t, ctx, `tr[data-id="`+id+`"] td.name a`)
	if !same {
		t.Fatal("the page reloaded to show the new job")
	}
	if name != "came-later" {
		t.Fatalf("row shows %q, want came-later", name)
	}
	// The row may first show the job starting (on a loaded machine the
	// stream can catch it there); it must then turn running by itself.
	within(t, ctx, 60*time.Second, "the row turns running", visible(`tr[data-id="`+id+`"] .badge.st-running`))
	within(t, ctx, 15*time.Second, "the row's last line", until(`document.querySelector('tr[data-id="`+id+`"] td.last').textContent.includes("ready")`))
	w.ok("kill", id)
	within(t, ctx, 15*time.Second, "the row turns killed", visible(`tr[data-id="`+id+`"] .badge.st-killed`))
	t.Logf("a job started after the list loaded appeared in %d ms, without a reload", took.Milliseconds())
}

// TestUIJobPageFollowsOutput: a job page shows output written after it was
// opened, and the job's end, live.
func TestUIJobPageFollowsOutput(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "talker", "--", "bash", "-c", `echo first; read x; printf '\033[32msecond %s\033[0m\n' "$x"; read y; echo third`)
	w.waitOutput(id, "first")
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the job page", chromedp.Navigate(u+"job/"+id), visible(`#log`))
	live(t, ctx)
	if got := text(t, ctx, `#log`); !strings.Contains(got, "first") {
		t.Fatalf("job page shows %q, want the first line", got)
	}
	within(t, ctx, 15*time.Second, "the job shown waiting for input", until(`document.querySelector("#meta .badge.input") !== null`))
	began := time.Now()
	w.ok("write", "--newline", id, "hello")
	within(t, ctx, 15*time.Second, "the second line, in green", until(`[...document.querySelectorAll("#log span.f2")].some(s => s.textContent.includes("second hello"))`))
	took := time.Since(began)
	w.ok("write", "--newline", id, "bye")
	within(t, ctx, 15*time.Second, "the third line and the end", until(`document.getElementById("log").textContent.includes("third") && document.getElementById("status").textContent === "done"`))
	run(t, ctx, "search the output", chromedp.Navigate(u+"job/"+id+"?grep=sec"), visible(`#matches`))
	if got := text(t, ctx, `#matches`); !strings.Contains(got, "second hello") || strings.Contains(got, "first") || strings.Contains(got, "third") {
		t.Fatalf("a search for \"sec\" shows %q", got)
	}
	t.Logf("output written after the page opened showed in %d ms; the end showed without a reload", took.Milliseconds())
}

// bigLog gives the (finished, output-less) job id a log of n bytes, stored
// as the supervisor stores output: 64 KiB chunks at absolute offsets. It is
// written by the sqlite3 shell, which fills the file at disk speed; a real
// capture of 1 GiB takes minutes on a shared machine. Every 16-byte line of
// a chunk is the chunk's offset, zero-padded to 15 digits.
func (w *world) bigLog(id string, n int64) {
	w.t.Helper()
	const chunk = 64 << 10
	if _, err := exec.LookPath("sqlite3"); err != nil {
		w.t.Skip("sqlite3 is not installed (scripts/deps.sh installs it)")
	}
	chunks := n / chunk
	sql := fmt.Sprintf(`PRAGMA busy_timeout = 10000;
PRAGMA synchronous = OFF;
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
INSERT INTO chunks (job_id, seq, stream, byte_offset, first_line, line_count, at, data)
SELECT '%s', i, 'stdout', i * %d, i * %d, %d, strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'),
       CAST(replace(hex(zeroblob(%d)), '00', printf('%%015d', i * %d) || char(10)) AS BLOB)
FROM c;
UPDATE jobs SET output_bytes = %d, output_lines = %d, last_output_at = strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now') WHERE id = '%s';
COMMIT;`,
		chunks-1, id, chunk, chunk/16, chunk/16, chunk/16, chunk, chunks*chunk, chunks*chunk/16, id)
	c := exec.Command("sqlite3", w.dbPath())
	c.Stdin = strings.NewReader(sql)
	if out, err := c.CombinedOutput(); err != nil {
		w.t.Fatalf("write the large log: %v\n%s", err, out)
	}
}

// TestUIHugeLogOpensAndJumpsToMiddle: a job with a 1 GiB log opens as a
// small one does (a page of output, not the whole log) and jumps to its
// middle.
func TestUIHugeLogOpensAndJumpsToMiddle(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	size := envInt64("JOBS_E2E_UI_LOG_BYTES", testlong.Pick[int64](256<<20, 1<<30)) &^ (64<<10 - 1)
	small := w.start("--name", "small", "--", "echo", "a small log")
	big := w.start("--name", "big", "--max-output", "0", "--", "true")
	w.waitTerminal(big, 30*time.Second)
	w.waitTerminal(small, 30*time.Second)
	began := time.Now()
	w.bigLog(big, size)
	t.Logf("wrote the %s log in %v", sizeText(size), time.Since(began).Round(time.Millisecond))
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "warm up", chromedp.Navigate(u+"job/"+small), visible(`#log`))

	open := func(path string) time.Duration {
		began := time.Now()
		// A hang guard: the time is a figure (a loaded machine took
		// over 20 s to open the 1 GiB log's page).
		within(t, ctx, 3*time.Minute, "open "+path, chromedp.Navigate(u+path), visible(`#log`))
		return time.Since(began)
	}
	tSmall := open("job/" + small)
	tBig := open("job/" + big)
	total, end := text(t, ctx, `#total`), text(t, ctx, `#endoff`)
	logLen := eval[int](t, ctx, `document.getElementById("log").textContent.length`)
	if total != strconv.FormatInt(size, 10) || !strings.HasPrefix(end, total) {
		t.Fatalf("the big job's page shows end %s of total %s, want %d of %d", end, total, size, size)
	}
	if logLen > 1<<20 {
		t.Fatalf("the page holds %d characters of log: it loaded more than a page", logLen)
	}
	began = time.Now()
	// The link navigates: the old page's #start is no proof that the
	// new one has loaded, and a node read from the old document is gone
	// once it is replaced. The new page counts once its own document is
	// complete.
	run(t, ctx, "click middle", chromedp.Click(chromedp.CSS(`#middle`)))
	settle(t, ctx, time.Minute, "the middle page",
		`location.search.includes("offset=") && document.readyState === "complete" && document.getElementById("start") !== null`)
	tMiddle := time.Since(began)
	start := text(t, ctx, `#start`)
	first := eval[string](t, ctx, `document.getElementById("log").textContent.slice(0, 15)`)
	mid := size / 2
	if start != strconv.FormatInt(mid, 10) {
		t.Fatalf("the middle page starts at %s, want %d", start, mid)
	}
	// The line at the middle names the 64 KiB chunk it is in.
	if want := fmt.Sprintf("%015d", mid&^(64<<10-1)); first != want {
		t.Fatalf("the middle page begins %q, want %q", first, want)
	}
	t.Logf("%s log: page opened in %d ms (a 12-byte log: %d ms), middle in %d ms",
		sizeText(size), tBig.Milliseconds(), tSmall.Milliseconds(), tMiddle.Milliseconds())
}

func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// TestUIShowsHostileTextAsText: a job name holding <script> and escape codes
// and output holding HTML and terminal sequences are shown as text: no
// element is injected, no script runs, the title is not changed, colours
// become spans.
func TestUIShowsHostileTextAsText(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	name := "<script>window.__pwned=1</script>\x1b]0;pwned\x07\x1b[2J"
	out := `<img src=x onerror="window.__pwned=2"><script>window.__pwned=3</script>` + "\x1b[31mRED\x1b[0m \x1b]0;pwned\x07\x1b[2J\u202eevil\n"
	id := w.start("--name", name, "--", "printf", "%s", out)
	w.waitTerminal(id, 30*time.Second)
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the list", chromedp.Navigate(u), visible(`tr[data-id="`+id+`"]`))
	live(t, ctx)
	cell := text(t, ctx, `tr[data-id="`+id+`"] td.name a`)
	pwned := eval[bool](t, ctx, `window.__pwned !== undefined`)
	imgs := eval[int](t, ctx, `document.querySelectorAll("main script, main img").length`)
	if pwned || imgs != 0 {
		t.Fatalf("the list ran or built injected markup: pwned=%v, elements=%d", pwned, imgs)
	}
	if !strings.Contains(cell, "<script>window.__pwned=1</script>") {
		t.Fatalf("the name shows as %q, want the <script> text", cell)
	}
	run(t, ctx, "open the job page", chromedp.Navigate(u+"job/"+id), visible(`#log`))
	logText := eval[string](t, ctx, `document.getElementById("log").textContent`)
	red := text(t, ctx, `#log span.f1`)
	pwned = eval[bool](t, ctx, `window.__pwned !== undefined`)
	imgs = eval[int](t, ctx, `document.querySelectorAll("main img").length`)
	scripts := eval[int](t, ctx, `document.querySelectorAll("script").length`)
	pageTitle := title(t, ctx)
	if pwned || imgs != 0 || scripts != 1 {
		t.Fatalf("the job page ran or built injected markup: pwned=%v, img=%d, scripts=%d", pwned, imgs, scripts)
	}
	if !strings.Contains(logText, `<img src=x onerror="window.__pwned=2">`) || red != "RED" {
		t.Fatalf("the log shows %q (red %q), want the HTML as text and RED in a colour span", logText, red)
	}
	if !strings.Contains(pageTitle, "<script>") || strings.ContainsAny(pageTitle+cell+logText, "\x1b\x07\u202e") {
		t.Fatalf("escape codes reached the page: title %q, log %q", pageTitle, logText)
	}
	t.Logf("a <script> name and HTML, OSC, CSI and U+202E in output shown as text; 0 scripts run, colours as spans")
}

// TestUIRefusesForeignRequests: a request without the token, with a foreign
// Host header, or from another origin is refused, the event streams too;
// actions need the token header and this origin; a page of another origin
// in a real browser cannot read the view.
func TestUIRefusesForeignRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "quiet", "--timeout", "60s", "--", "sleep", "60")
	u := w.ui("--allow-control")
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + pu.Host
	_, port, _ := net.SplitHostPort(pu.Host)
	token := strings.Trim(pu.Path, "/")
	get := func(method, path string, hdr map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(method, origin+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	base := "/" + token
	cases := []struct {
		what   string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		{"the list with its token", "GET", base + "/", nil, 200},
		{"no token", "GET", "/", nil, 403},
		{"a wrong token", "GET", "/" + strings.Repeat("x", len(token)) + "/", nil, 403},
		{"a token prefix", "GET", base[:len(base)-1] + "/", nil, 403},
		{"the event stream without token", "GET", "/list.sse", nil, 403},
		{"a job's event stream with a wrong token", "GET", "/x/job/" + id + "/out.sse?from=0", nil, 403},
		{"a foreign Host (DNS rebinding)", "GET", base + "/", map[string]string{"Host": "attacker.example:" + port}, 421},
		{"a foreign Host on the event stream", "GET", base + "/list.sse", map[string]string{"Host": "attacker.example:" + port}, 421},
		{"another port in Host", "GET", base + "/", map[string]string{"Host": "127.0.0.1:1"}, 421},
		{"another origin", "GET", base + "/", map[string]string{"Origin": "http://attacker.example"}, 403},
		{"another origin on the event stream", "GET", base + "/list.sse", map[string]string{"Origin": "http://attacker.example"}, 403},
		{"a cross-site fetch", "GET", base + "/", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"kill without the token header", "POST", base + "/job/" + id + "/kill", map[string]string{"Origin": origin}, 403},
		{"kill with the header from another origin", "POST", base + "/job/" + id + "/kill", map[string]string{"Origin": "http://attacker.example", "X-Jobs-Token": token}, 403},
		{"kill with the header and no origin", "POST", base + "/job/" + id + "/kill", map[string]string{"X-Jobs-Token": token}, 403},
		{"a preflight", "OPTIONS", base + "/job/" + id + "/kill", map[string]string{"Origin": "http://attacker.example", "Access-Control-Request-Method": "POST"}, 403},
	}
	refused := 0
	for _, c := range cases {
		if got := get(c.method, c.path, c.hdr); got != c.want {
			t.Errorf("%s: %s %s answered %d, want %d", c.what, c.method, c.path, got, c.want)
		} else if c.want != 200 {
			refused++
		}
	}
	if j := w.poll(id); j.Status != "running" {
		t.Fatalf("a refused kill ended the job: %s", j.Status)
	}
	if r := w.jobs("ui", "--addr", "0.0.0.0:0"); r.code != 2 || !strings.Contains(r.stderr, "--allow-remote") {
		t.Errorf("jobs ui on 0.0.0.0 without --allow-remote: %v", r)
	}

	// A page of another origin, in a real browser, tries to read the view
	// and to kill the job with the token it somehow knows.
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		fmt.Fprint(rw, "<!doctype html><title>elsewhere</title>")
	}))
	defer evil.Close()
	ctx := browser(t)
	run(t, ctx, "a foreign page", chromedp.Navigate(evil.URL))
	read := eval[string](t, ctx, fmt.Sprintf(`fetch(%q).then(r => r.text()).then(() => "read").catch(() => "blocked")`, u), chromedp.EvalAwaitPromise)
	kill := eval[string](t, ctx, fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"X-Jobs-Token": %q}}).then(r => "status " + r.status).catch(() => "blocked")`, u+"job/"+id+"/kill", token), chromedp.EvalAwaitPromise)
	if read != "blocked" || kill != "blocked" {
		t.Fatalf("a page of another origin got: read %q, kill %q", read, kill)
	}
	if j := w.poll(id); j.Status != "running" {
		t.Fatalf("the foreign page's kill ended the job: %s", j.Status)
	}
	w.ok("kill", id)
	t.Logf("%d foreign requests refused (no token, wrong Host, other origin, action without header); a foreign page read nothing and killed nothing", refused+2)
}

// TestUIKillButtonEndsTree: with --allow-control the job page's kill button
// ends the job's whole process tree; without it there is no button and the
// action does not exist.
func TestUIKillButtonEndsTree(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "tree", "--timeout", "60s", "--", "bash", "-c", `sleep 300 & echo child $!; (sleep 300 & echo grandchild $!; wait) & wait`)
	out := w.waitOutput(id, "grandchild")
	var pids []int
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if pid, err := strconv.Atoi(f[1]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	j := w.poll(id)
	pids = append(pids, j.PID)
	if len(pids) != 3 {
		t.Fatalf("found pids %v in %q", pids, out)
	}
	for _, pid := range pids {
		if !procAlive(pid) {
			t.Fatalf("pid %d is not alive before the kill", pid)
		}
	}

	ro := w.ui()
	ctx := browser(t)
	run(t, ctx, "the read-only job page", chromedp.Navigate(ro+"job/"+id), visible(`#log`))
	if eval[int](t, ctx, `document.querySelectorAll("#control, #kill").length`) != 0 {
		t.Fatal("the read-only view shows control buttons")
	}

	u := w.ui("--allow-control")
	run(t, ctx, "the job page with control", chromedp.Navigate(u+"job/"+id), visible(`#kill`))
	live(t, ctx)
	began := time.Now()
	run(t, ctx, "click kill", chromedp.Click(chromedp.CSS(`#kill`)))
	within(t, ctx, 20*time.Second, "the page shows killed", until(`document.getElementById("status").textContent === "killed"`))
	took := time.Since(began)
	waitFor(t, 10*time.Second, "the job's processes to be gone", func() bool {
		for _, pid := range pids {
			if procAlive(pid) {
				return false
			}
		}
		return true
	})
	within(t, ctx, 10*time.Second, "the kill's answer", until(`document.getElementById("control-result").textContent.includes("killed")`))
	if result := text(t, ctx, `#control-result`); !strings.Contains(result, "killed") {
		t.Errorf("the page answered %q", result)
	}
	if st := w.poll(id).Status; st != "killed" {
		t.Fatalf("job is %s after the kill button", st)
	}
	t.Logf("kill button: job and its %d processes ended, page showed killed in %d ms; read-only view has no button", len(pids), took.Milliseconds())
}

// TestUITimelineAndScreenshots: the timeline draws a bar per job, coloured by
// status, and the jobs-per-day chart a segment per outcome. With
// JOBS_UI_SCREENSHOTS=1 it writes the screenshots of the list, a job page
// and the timeline into docs/.
func TestUITimelineAndScreenshots(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	done := w.start("--cwd", "/tmp", "--name", "unit-tests", "--", "bash", "-c", `sleep 0.8; printf '\033[1mok\033[0m  pkg/db   0.41s\n\033[1mok\033[0m  pkg/logs 1.20s\n\033[32mPASS\033[0m\n'`)
	failed := w.start("--cwd", "/tmp", "--name", "lint", "--", "bash", "-c", `sleep 0.4; echo 'main.go:12: unused variable x' >&2; exit 1`)
	killed := w.start("--cwd", "/tmp", "--name", "dev-server", "--timeout", "60s", "--", "sleep", "60")
	w.waitTerminal(done, 30*time.Second)
	w.waitTerminal(failed, 30*time.Second)
	w.ok("kill", killed)
	build := w.start("--cwd", "/tmp", "--name", "build", "--timeout", "120s", "--", "bash", "-c",
		`for i in $(seq 1 40); do printf '\033[36m[%2d/40]\033[0m compiling module_%02d.go\n' $i $i; done; printf '\033[33mwarning\033[0m: 2 deprecated calls\n'; sleep 60`)
	w.waitOutput(build, "warning")
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the timeline", chromedp.Navigate(u+"timeline"), visible(`#timeline`))
	bars := eval[int](t, ctx, `document.querySelectorAll("#timeline rect.bar").length`)
	segments := eval[int](t, ctx, `document.querySelectorAll("#daily rect.bar").length`)
	classes := eval[[]string](t, ctx, `[...document.querySelectorAll("#timeline rect.bar")].map(r => r.getAttribute("class"))`)
	if bars != 4 {
		t.Fatalf("timeline has %d bars, want 4 (%v)", bars, classes)
	}
	for _, want := range []string{"st-done", "st-failed", "st-killed", "st-running"} {
		if !strings.Contains(strings.Join(classes, " "), want) {
			t.Errorf("timeline bars %v lack %s", classes, want)
		}
	}
	if segments != 3 {
		t.Errorf("jobs-per-day chart has %d segments, want 3 (done, failed, killed today)", segments)
	}
	if os.Getenv("JOBS_UI_SCREENSHOTS") == "1" {
		shot := func(name string, actions ...steps) {
			run(t, ctx, "open the page for "+name, actions...)
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("screenshot %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		shot("ui-timeline.png")
		// A paused job, for the list's picture.
		watcher := w.start("--cwd", "/tmp", "--name", "file-watcher", "--timeout", "120s", "--", "bash", "-c", `echo 'watching src/ for changes'; sleep 100`)
		w.waitOutput(watcher, "watching")
		w.ok("pause", watcher)
		defer w.ok("kill", watcher)
		shot("ui-list.png", chromedp.Navigate(u), visible(`tr[data-id="`+build+`"]`),
			visible(`tr[data-id="`+watcher+`"] .badge.st-paused`), visible(`#live.on`))
		shot("ui-job.png", chromedp.Navigate(u+"job/"+build), visible(`#log`),
			visible(`#live.on`))
		t.Log("wrote docs/ui-list.png, docs/ui-job.png, docs/ui-timeline.png")
	}
	w.ok("kill", build)
	t.Logf("timeline: %d bars coloured by status; jobs per day: %d outcome segments", bars, segments)
}

// TestUIReadsWithoutSupervisor: with no supervisor running, the pages and
// their event streams read the database, start no supervisor, and while
// nothing changes send nothing new and cost the ui process little.
func TestUIReadsWithoutSupervisor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "finished", "--", "bash", "-c", "echo hello; echo world")
	w.waitTerminal(id, 30*time.Second)
	w.stop()
	live := func() int {
		var n int
		if err := w.sqlDB().QueryRow(`SELECT count(*) FROM supervisors WHERE ended_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := live(); n != 0 {
		t.Fatalf("%d supervisors still live before the test", n)
	}
	u, pid := w.uiProcess()
	for _, path := range []string{"", "job/" + id, "job/" + id + "?offset=0", "job/" + id + "?grep=wor", "timeline"} {
		resp, err := http.Get(u + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "finished") {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}

	// One open list stream, idle: the database does not change.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u+"list.sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	waitFor(t, 10*time.Second, "the first rows event", func() bool {
		select {
		case e := <-events:
			return e == "rows"
		default:
			return false
		}
	})
	const idle = 3 * time.Second
	before := cpuTicks(t, pid)
	deadline := time.After(idle)
	more := 0
wait:
	for {
		select {
		case e := <-events:
			if e == "rows" {
				more++
			}
		case <-deadline:
			break wait
		}
	}
	ticks := cpuTicks(t, pid) - before
	cancel()
	if more != 0 {
		t.Errorf("the list stream sent %d more rows events while nothing changed", more)
	}
	if n := live(); n != 0 {
		t.Fatalf("reading through the ui started %d supervisors", n)
	}
	// A look a second costs milliseconds; a stream that spun would use the
	// whole window.
	if ms := ticks * 10; ms > int64(idle/time.Millisecond)/4 {
		t.Errorf("the ui used %d ms of CPU in %v idle with a list open", ms, idle)
	}
	t.Logf("no supervisor: every page served, 0 started; idle list stream: %d new events, %d ms CPU in %v", more, ticks*10, idle)
}
