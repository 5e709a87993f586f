package e2e

// Browser tests of the web view as a place to work: search with exact
// counts and a jump to each match, line numbers and links by line, the
// output first, paused jobs shown paused, the list filtered and sorted,
// error pages that are pages.
//
// Knob: JOBS_E2E_UI_SEARCH_BYTES (default 64 MiB) is the size of the log
// the whole-log search reads.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentjobs/jobs/internal/testlong"
)

// followLink opens the target of the link a CSS selector finds, as a
// click does, and waits for the page to load (a click's navigation would
// race the next step's look at the page).
func followLink(t *testing.T, ctx context.Context, css string) steps {
	t.Helper()
	href := eval[string](t, ctx, `document.querySelector(`+strconv.Quote(css)+`).href`)
	return chromedp.Navigate(href)
}

// TestUISearchCountsExactlyAndJumps: a search for a pattern found once in
// a few hundred lines says one match, shows it with its line number, and
// its link opens the output around that line with the line marked.
func TestUISearchCountsExactlyAndJumps(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// crate_77 is followed by a space once; crate_770..crate_779 are not.
	id := w.start("--name", "crates", "--", "bash", "-c", `for i in $(seq 0 999); do echo "Compiling crate_$i v0.1.$i"; done`)
	w.waitTerminal(id, 30*time.Second)
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "search crate_77 and a space", chromedp.Navigate(u+"job/"+id+"?grep=crate_77%20"), visible(`#range`))
	if n := eval[int](t, ctx, `document.querySelectorAll("#matches .match").length`); n != 1 {
		t.Fatalf("the search shows %d matches, want 1; range says %q", n, text(t, ctx, `#range`))
	}
	if got := text(t, ctx, `#count`); got != "1" {
		t.Fatalf("the search counts %q matches, want 1 (range says %q)", got, text(t, ctx, `#range`))
	}
	line := text(t, ctx, `#matches .match a.n`)
	shown := text(t, ctx, `#matches .match .text`)
	if line != "78" || !strings.Contains(shown, "crate_77 v0.1.77") {
		t.Fatalf("the match shows line %q text %q, want line 78 and crate_77", line, shown)
	}
	within(t, ctx, 20*time.Second, "jump to the match in context", followLink(t, ctx, `#matches .match a.n`),
		until(`location.hash === "#L78" && document.getElementById("L78") !== null`))
	target := eval[string](t, ctx, `document.querySelector("#log .l:target").textContent`)
	before := eval[string](t, ctx, `document.getElementById("L77").textContent`)
	if !strings.Contains(target, "crate_77 v0.1.77") || !strings.Contains(before, "crate_76 ") {
		t.Fatalf("the jump marks %q (line before %q), want crate_77's line in its context", target, before)
	}
	// The search also says when nothing matched, and a bad pattern is a
	// page with the reason, not a bare error.
	run(t, ctx, "search for nothing", chromedp.Navigate(u+"job/"+id+"?grep=no-such-text"), visible(`#range`))
	if got := text(t, ctx, `#count`); got != "0" {
		t.Fatalf("a search without match counts %q", got)
	}
	run(t, ctx, "a bad pattern", chromedp.Navigate(u+"job/"+id+"?grep=%28"), visible(`main .error`))
	if msg := text(t, ctx, `main .error`); !strings.Contains(msg, "regular expression") {
		t.Fatalf("a bad pattern says %q", msg)
	}
	t.Logf("crate_77 + space: 1 match of 1000 lines, line 78, jump marks it in context")
}

// TestUISearchWholeLargeLog: a search over a large log reads all of it,
// counts every match exactly, and shows the first ones with their line
// numbers.
func TestUISearchWholeLargeLog(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	size := envInt64("JOBS_E2E_UI_SEARCH_BYTES", testlong.Pick[int64](16<<20, 64<<20)) &^ (64<<10 - 1)
	big := w.start("--name", "big", "--max-output", "0", "--", "true")
	w.waitTerminal(big, 30*time.Second)
	w.bigLog(big, size)
	u, pid := w.uiProcess()
	ctx := browser(t)
	// Every line of a 64 KiB chunk is the chunk's offset: a chunk near the
	// start and the last one match 4096 lines each.
	first, last := int64(64<<10), size-64<<10
	pattern := fmt.Sprintf("^(%015d|%015d)$", first, last)
	began := time.Now()
	within(t, ctx, 80*time.Second, "search the whole log", chromedp.Navigate(u+"job/"+big+"?grep="+pattern), visible(`#count`))
	took := time.Since(began)
	count := text(t, ctx, `#count`)
	shown := eval[int](t, ctx, `document.querySelectorAll("#matches .match").length`)
	firstLine := text(t, ctx, `#matches .match a.n`)
	if count != "8192" {
		t.Fatalf("the search counts %s matches, want 8192; range says %q", count, text(t, ctx, `#range`))
	}
	if shown == 0 || shown > 1000 {
		t.Fatalf("the search shows %d matches, want the first ones (1000 at most)", shown)
	}
	if want := strconv.FormatInt(first/16+1, 10); firstLine != want {
		t.Fatalf("the first match is on line %s, want %s", firstLine, want)
	}
	// The next page of matches goes on after the first thousand, and a
	// page of them from the end of the first chunk reaches the last chunk.
	run(t, ctx, "the next matches", followLink(t, ctx, `#more-matches`), visible(`#count`))
	if got, want := text(t, ctx, `#matches .match a.n`), strconv.FormatInt(first/16+1+1000, 10); got != want {
		t.Fatalf("the next matches start on line %s, want %s", got, want)
	}
	endOfFirst := first/16 + 4096
	run(t, ctx, "the matches after the first chunk", chromedp.Navigate(u+"job/"+big+"?grep="+pattern+"&after="+strconv.FormatInt(endOfFirst, 10)), visible(`#count`))
	if got, want := text(t, ctx, `#matches .match a.n`), strconv.FormatInt(last/16+1, 10); got != want {
		t.Fatalf("the matches after line %d start on line %s, want %s", endOfFirst, got, want)
	}
	if got := text(t, ctx, `#count`); got != "8192" {
		t.Fatalf("a later page of matches counts %s, want 8192", got)
	}
	// Memory is a page of output and the listed matches, not the log.
	hwm := peakRSS(pid)
	if hwm > 256<<20 {
		t.Fatalf("the ui process peaked at %d MiB searching a %s log", hwm>>20, sizeText(size))
	}
	// The same bytes through sqlite3 and grep -c: the same count, and a
	// baseline for the time.
	began = time.Now()
	gc := exec.Command("bash", "-o", "pipefail", "-c", `sqlite3 -readonly "$1" "SELECT CAST(data AS TEXT) FROM chunks WHERE job_id = '$2' ORDER BY byte_offset" | grep -cE "$3"`, "grep", w.dbPath(), big, pattern)
	gout, err := gc.Output()
	if err != nil {
		t.Fatalf("sqlite3 | grep -c: %v", err)
	}
	grepTook := time.Since(began)
	if got := strings.TrimSpace(string(gout)); got != count {
		t.Fatalf("grep -c counts %s, the page %s", got, count)
	}
	t.Logf("%s log: 8192 matches counted (grep -c agrees), first on line %s, in %d ms (sqlite3 | grep -c: %d ms); ui peak RSS %d MiB",
		sizeText(size), firstLine, took.Milliseconds(), grepTook.Milliseconds(), hwm>>20)
}

// TestUIJobPageOutputFirstLineLinks: the output comes before the folded
// metadata; every line has a number that links to the line; a jump by
// line number opens the output there.
func TestUIJobPageOutputFirstLineLinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "lines", "--", "bash", "-c", `for i in $(seq 1 5000); do printf 'row %05d \033[32mgreen\033[0m\n' $i; done`)
	w.waitTerminal(id, 30*time.Second)
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the job page", chromedp.Navigate(u+"job/"+id), visible(`#log`))
	order := eval[bool](t, ctx, `!!(document.getElementById("log").compareDocumentPosition(document.getElementById("details")) & Node.DOCUMENT_POSITION_FOLLOWING)`)
	open := eval[bool](t, ctx, `document.getElementById("details").open`)
	if !order || open {
		t.Fatalf("the metadata is not folded below the output: after=%v open=%v", order, open)
	}
	// The log's top is within the first screen.
	if top := eval[float64](t, ctx, `document.getElementById("log").getBoundingClientRect().top`); top > 400 {
		t.Fatalf("the output starts %v px down the page", top)
	}
	lastNo := eval[string](t, ctx, `[...document.querySelectorAll("#log .l")].pop().id`)
	if lastNo != "L5000" {
		t.Fatalf("the last line of the page is %q, want L5000", lastNo)
	}
	if got := eval[string](t, ctx, `document.getElementById("L5000").textContent`); !strings.HasPrefix(got, "row 05000 green") {
		t.Fatalf("line 5000 reads %q", got)
	}
	run(t, ctx, "jump to line 1234", chromedp.SetValue(chromedp.CSS(`#line`), "1234"), chromedp.Submit(chromedp.CSS(`#line`)))
	settle(t, ctx, 20*time.Second, "the page of line 1234", `location.hash === "#L1234" && document.querySelector("#log .l:target") !== null`)
	if got := eval[string](t, ctx, `document.querySelector("#log .l:target").textContent`); !strings.HasPrefix(got, "row 01234 ") {
		t.Fatalf("the jump to line 1234 marks %q", got)
	}
	href := eval[string](t, ctx, `document.querySelector("#L1240 a.n").getAttribute("href")`)
	if !strings.Contains(href, "line=1240") || !strings.HasSuffix(href, "#L1240") {
		t.Fatalf("line 1240 links to %q", href)
	}
	// The link opens that line in another load of the page.
	run(t, ctx, "follow a line's link", followLink(t, ctx, `#L1240 a.n`), until(`location.hash === "#L1240"`))
	if got := eval[string](t, ctx, `document.querySelector("#log .l:target").textContent`); !strings.HasPrefix(got, "row 01240 ") {
		t.Fatalf("line 1240's link marks %q", got)
	}
	t.Logf("output first, metadata folded; 5000 numbered lines; jump to line 1234 and link to 1240 land on them")
}

// TestUIShowsPausedJob: a paused job reads paused in the list and on its
// page, and running again once resumed.
func TestUIShowsPausedJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(append([]string{"--name", "napper", "--timeout", "120s"}, helper("ready-idle")...)...)
	w.waitOutput(id, "ready")
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "open the list", chromedp.Navigate(u), visible(`tr[data-id="`+id+`"] .badge.st-running`))
	live(t, ctx)
	w.ok("pause", id)
	within(t, ctx, 20*time.Second, "the row shows paused", visible(`tr[data-id="`+id+`"] .badge.st-paused`))
	run(t, ctx, "open the job page", chromedp.Navigate(u+"job/"+id), visible(`#log`))
	if got := text(t, ctx, `#status`); got != "paused" {
		t.Fatalf("the job page's status reads %q, want paused", got)
	}
	live(t, ctx)
	w.ok("resume", id)
	within(t, ctx, 20*time.Second, "the page shows running again", until(`document.getElementById("status").textContent === "running"`))
	w.ok("kill", id)
	t.Logf("pause shows paused in the list and on the page; resume shows running")
}

// TestUIListFilterSort: the list keeps the jobs of a status or whose name
// or command holds a text, sorted as asked, and the live updates keep the
// filter.
func TestUIListFilterSort(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.start("--name", "alpha-build", "--", "true")
	w.waitTerminal(a, 30*time.Second)
	b := w.start("--name", "beta-lint", "--", "bash", "-c", "exit 3")
	w.waitTerminal(b, 30*time.Second)
	c := w.start("--name", "gamma", "--", "echo", "special-word")
	w.waitTerminal(c, 30*time.Second)
	u := w.ui()
	ctx := browser(t)
	ids := func() []string {
		return eval[[]string](t, ctx, `[...document.querySelectorAll("#rows tr[data-id]")].map(r => r.dataset.id)`)
	}
	run(t, ctx, "the failed jobs", chromedp.Navigate(u+"?status=failed"), visible(`#rows`))
	if got := ids(); len(got) != 1 || got[0] != b {
		t.Fatalf("status=failed lists %v, want only %s", got, b)
	}
	run(t, ctx, "filter by command text with the form", chromedp.Navigate(u), visible(`#q`),
		chromedp.SetValue(chromedp.CSS(`#q`), "SPECIAL"), chromedp.Submit(chromedp.CSS(`#q`)))
	settle(t, ctx, 20*time.Second, "the filtered list", `location.search.includes("q=SPECIAL") && document.readyState === "complete"`)
	if got := ids(); len(got) != 1 || got[0] != c {
		t.Fatalf("q=SPECIAL lists %v, want only %s", got, c)
	}
	run(t, ctx, "oldest first", chromedp.Navigate(u+"?sort=oldest"), visible(`#rows`))
	if got := ids(); len(got) != 3 || got[0] != a || got[2] != c {
		t.Fatalf("sort=oldest lists %v, want %s first and %s last", got, a, c)
	}
	run(t, ctx, "by name", chromedp.Navigate(u+"?sort=name&q=a"), visible(`#rows`))
	if got := ids(); len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("sort=name lists %v, want alpha, beta, gamma", got)
	}
	// A job started later that the filter keeps appears live; one it
	// leaves out does not.
	run(t, ctx, "the failed jobs, live", chromedp.Navigate(u+"?status=failed"), visible(`#rows`))
	live(t, ctx)
	d := w.start("--name", "delta-fails", "--", "bash", "-c", "exit 4")
	e := w.start("--name", "epsilon-ok", "--", "true")
	w.waitTerminal(d, 30*time.Second)
	w.waitTerminal(e, 30*time.Second)
	within(t, ctx, 20*time.Second, "the new failed job appears", visible(`tr[data-id="`+d+`"]`))
	if n := eval[int](t, ctx, `document.querySelectorAll('tr[data-id="`+e+`"]').length`); n != 0 {
		t.Fatal("a job that succeeded shows in the failed list")
	}
	t.Logf("status, text and sort filters keep the right jobs; the live list keeps the filter")
}

// TestUIErrorPages: a job that does not exist, a bad offset and an unknown
// path answer pages with the layout, a message and a link back.
func TestUIErrorPages(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--name", "one", "--", "true")
	w.waitTerminal(id, 30*time.Second)
	u := w.ui()
	for _, c := range []struct {
		path string
		code int
		says string
	}{
		{"job/zzzzzzzz", 404, "not found"},
		{"job/" + id + "?offset=abc", 400, "offset"},
		{"job/" + id + "?line=-3", 400, "line"},
		{"no/such/page", 404, "no such page"},
	} {
		resp, err := http.Get(u + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s, want %d and a page", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.code)
		}
	}
	ctx := browser(t)
	run(t, ctx, "a missing job", chromedp.Navigate(u+"job/zzzzzzzz"), visible(`main .error`))
	msg := text(t, ctx, `main .error`)
	back := eval[int](t, ctx, `document.querySelectorAll('main a#back').length`)
	header := eval[int](t, ctx, `document.querySelectorAll('header a.brand').length`)
	if !strings.Contains(msg, "not found") || back != 1 || header != 1 {
		t.Fatalf("the error page says %q with %d links back and %d headers", msg, back, header)
	}
	run(t, ctx, "back to the list", followLink(t, ctx, `#back`), visible(`tr[data-id="`+id+`"]`))
	t.Logf("missing job, bad offset, bad line, unknown path: pages with the layout and a way back")
}

// TestUISearchAcrossCapGap: in a job whose output cap removed its middle,
// a search finds lines on both sides of the gap with their true numbers,
// says what could not be searched, and a match's link opens its line.
func TestUISearchAcrossCapGap(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// 40000 lines of 8 bytes (n=00001) under a 64 KiB cap: the first
	// lines and the newest stay, the middle goes.
	id := w.start("--name", "capped", "--max-output", "64KiB", "--", "bash", "-c", `for i in $(seq 1 40000); do printf 'n=%05d\n' $i; done`)
	w.waitTerminal(id, 60*time.Second)
	u := w.ui()
	ctx := browser(t)
	run(t, ctx, "search both sides of the gap", chromedp.Navigate(u+"job/"+id+"?grep="+url.QueryEscape(`^n=(00002|39999|20000)$`)), visible(`#count`))
	count := text(t, ctx, `#count`)
	lines := eval[[]string](t, ctx, `[...document.querySelectorAll("#matches .match a.n")].map(a => a.textContent)`)
	rangeText := text(t, ctx, `#range`)
	if count != "2" || len(lines) != 2 || lines[0] != "2" || lines[1] != "39999" {
		t.Fatalf("the search counts %s and lists lines %v, want 2: lines 2 and 39999 (range %q)", count, lines, rangeText)
	}
	if !strings.Contains(rangeText, "output cap") {
		t.Fatalf("the search does not say what the cap removed: %q", rangeText)
	}
	run(t, ctx, "open the match after the gap", followLink(t, ctx, `#matches .match:last-child a.n`))
	settle(t, ctx, 20*time.Second, "line 39999 marked", `location.hash === "#L39999" && document.querySelector("#log .l:target") !== null`)
	if got := eval[string](t, ctx, `document.querySelector("#log .l:target").textContent`); got != "n=39999\n" {
		t.Fatalf("the link to line 39999 marks %q", got)
	}
	t.Logf("a capped log: matches before and after the gap on their true lines; %q", rangeText)
}
