// Command matrixreport reads the `go test -json` stream of the reliability
// matrix's row tests (scripts/matrix.sh) on stdin and prints the matrix as
// a markdown table: row, test(s), result, figure. A row's tests are named
// Test<ROW><Words> (TestB14PIDReuseNeverSignalled is row B14); a test logs
// its figure with t.Logf("MATRIX-FIGURE %s", …). It exits 1 when a test
// failed or a package did not build.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// rows are the rows of the matrix in order, with their titles.
var rows = []struct{ id, title string }{
	{"A1", "Flood, zero loss"},
	{"A2", "Trickle latency and child never blocks"},
	{"A3", "Output cap and eviction"},
	{"A4", "Readers during a flood; WAL stays bounded"},
	{"A5", "Churn: many short jobs"},
	{"A6", "Several supervisors, one DB"},
	{"A7", "Fast exit keeps output"},
	{"B1", "kill -9 supervisor mid-write"},
	{"B2", "kill -9 of the CLI"},
	{"B3", "SIGSTOP'd child"},
	{"B4", "Child ignores SIGTERM"},
	{"B5", "Grandchild in the same group"},
	{"B6", "Grandchild escapes the group"},
	{"B7", "Grandchild holds the pipe"},
	{"B8", "Cannot start"},
	{"B9", "Disk full"},
	{"B10", "Read-only DB or dir"},
	{"B11", "DB locked by a foreign writer"},
	{"B12", "Corrupt DB"},
	{"B13", "Clock jumps"},
	{"B14", "PID reuse during recovery"},
	{"B15", "SIGPIPE at both ends"},
	{"B16", "Cold start race"},
	{"B17", "Nothing leaks into children"},
	{"B18", "tmux re-adoption"},
	{"B19", "Timeout"},
	{"B20", "waiting_for_input"},
	{"B21", "Supervisor frozen"},
	{"B22", "DB removed or replaced under a running supervisor"},
	{"C1", "Invalid ids"},
	{"C2", "Injection in labels, names, scopes"},
	{"C3", "Huge stdin writes"},
	{"C4", "Binary output"},
	{"C5", "Enormous single line"},
	{"C6", "Offsets and limits"},
	{"C7", "Malformed or pathological regex"},
	{"C8", "Environment abuse"},
	{"C9", "CLI robustness"},
	{"D1", "Scope isolation"},
	{"D2", "Unguessable ids"},
	{"D3", "File modes"},
	{"D4", "No secrets persisted"},
	{"D5", "Symlink and ownership attacks"},
	{"D6", "Socket peer check"},
	{"D7", "Kill never hits the wrong group"},
	{"D8", "One SQLite in the binary"},
	{"D9", "Cleaned text has no escapes"},
	{"E1", "Runtime directory wiped under a live supervisor"},
	{"E2", "A foreign SQLite file"},
	{"E3", "Planted companion files"},
	{"E4", "Protocol abuse on jobs mcp"},
	{"E5", "Inherited signal mask"},
	{"E6", "Frozen supervisor"},
	{"E7", "WAL deleted after a crash"},
	{"E8", "Escapee without the cookie"},
	{"E9", "Invisible and bidi controls"},
	{"E10", "Reads never migrate"},
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// test is what one top-level row test did.
type test struct {
	name    string
	result  string // pass, fail, skip, or "" when it never ended
	skip    string // the reason it gave
	figures []string
	last    string // its last log line, the skip reason when it skips
}

var (
	rowName = regexp.MustCompile(`^Test([A-E][0-9]+)[A-Z]`)
	logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
)

func main() {
	tests, broken, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrixreport:", err)
		os.Exit(2)
	}
	byRow := map[string][]*test{}
	for _, t := range tests {
		m := rowName.FindStringSubmatch(t.name)
		byRow[m[1]] = append(byRow[m[1]], t)
	}
	failed := len(broken) > 0
	fmt.Println("| row | test(s) | result | figure |")
	fmt.Println("|---|---|---|---|")
	counts := map[string]int{}
	for _, r := range rows {
		ts := byRow[r.id]
		delete(byRow, r.id)
		if len(ts) == 0 {
			counts["no test"]++
			fmt.Printf("| %s %s | — | no test | |\n", r.id, cell(r.title))
			continue
		}
		res := rowResult(ts)
		counts[strings.SplitN(res, ":", 2)[0]]++
		failed = failed || strings.HasPrefix(res, "fail")
		var names, figs []string
		for _, t := range ts {
			names = append(names, "`"+t.name+"`")
			figs = append(figs, t.figures...)
		}
		fmt.Printf("| %s %s | %s | %s | %s |\n", r.id, cell(r.title), strings.Join(names, "<br>"), cell(res), cell(strings.Join(figs, "; ")))
	}
	// Tests named after a row the table does not know.
	var extra []string
	for id := range byRow {
		extra = append(extra, id)
	}
	sort.Strings(extra)
	for _, id := range extra {
		for _, t := range byRow[id] {
			fmt.Printf("| %s (unknown row) | `%s` | %s | %s |\n", id, t.name, cell(rowResult([]*test{t})), cell(strings.Join(t.figures, "; ")))
		}
	}
	fmt.Println()
	var summary []string
	for _, k := range []string{"pass", "fail", "skip", "no test"} {
		if counts[k] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	fmt.Printf("%d rows: %s.\n", len(rows), strings.Join(summary, ", "))
	for _, b := range broken {
		fmt.Printf("\nPackage %s did not build or failed outside a test.\n", b)
	}
	if failed {
		os.Exit(1)
	}
}

// read collects the row tests from the go test -json stream, and the
// packages that failed outside any test (a build failure).
func read(r io.Reader) (map[string]*test, []string, error) {
	tests := map[string]*test{}
	var failedPkgs []string
	testFailed := map[string]bool{} // packages where a test failed (row test or not)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line that is not an event (go's own output)
		}
		if e.Test == "" {
			if e.Action == "fail" {
				failedPkgs = append(failedPkgs, e.Package)
			}
			continue
		}
		if e.Action == "fail" {
			testFailed[e.Package] = true
		}
		top, _, sub := strings.Cut(e.Test, "/")
		if !rowName.MatchString(top) {
			continue
		}
		t := tests[e.Package+"."+top]
		if t == nil {
			t = &test{name: top}
			tests[e.Package+"."+top] = t
		}
		switch e.Action {
		case "output":
			line := strings.TrimRight(e.Output, "\n")
			if _, fig, ok := strings.Cut(line, "MATRIX-FIGURE "); ok {
				t.figures = append(t.figures, fig)
			} else if m := logLine.FindStringSubmatch(line); m != nil {
				t.last = m[1]
			}
		case "pass", "fail", "skip":
			if sub {
				if e.Action == "fail" {
					t.result = "fail"
				}
				continue
			}
			if t.result != "fail" {
				t.result = e.Action
			}
			if e.Action == "skip" {
				t.skip = t.last
			}
		}
	}
	// A package that failed with no failed test did not build, or failed
	// in TestMain or after its tests (a panic, a timeout).
	var broken []string
	for _, p := range failedPkgs {
		if !testFailed[p] {
			broken = append(broken, p)
		}
	}
	return tests, broken, sc.Err()
}

// rowResult sums up a row's tests: fail if one failed, skip (with the
// reasons) if all skipped, else pass, naming the ones skipped.
func rowResult(ts []*test) string {
	var pass, fail, skip, unfinished int
	var reasons []string
	for _, t := range ts {
		switch t.result {
		case "pass":
			pass++
		case "fail":
			fail++
		case "skip":
			skip++
			reasons = append(reasons, t.skip)
		default:
			unfinished++
		}
	}
	switch {
	case fail > 0:
		return "fail"
	case unfinished > 0:
		return "fail: did not finish (timeout or crash)"
	case pass == 0:
		return "skip: " + strings.Join(reasons, "; ")
	case skip > 0:
		return fmt.Sprintf("pass (%d skipped: %s)", skip, strings.Join(reasons, "; "))
	}
	return "pass"
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
