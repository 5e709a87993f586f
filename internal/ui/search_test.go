package ui

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// naiveSearch is the definition a search must meet: every line, cleaned as
// the page shows it, tested alone.
func naiveSearch(text string, re *regexp.Regexp) []hit {
	var out []hit
	at := int64(0)
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l == "" {
			continue
		}
		body := strings.TrimSuffix(l, "\n")
		shown := body
		if strings.ContainsAny(body, "\x1b\r") {
			shown = string(textclean.CleanLine([]byte(body)))
		}
		if re.MatchString(shown) {
			out = append(out, hit{Line: int64(i) + jobs.FirstLine, Offset: at})
		}
		at += int64(len(l))
	}
	return out
}

// TestSearcherMatchesEachLineAlone: whatever the reads' sizes, the search
// finds exactly the lines that match alone, with their numbers and
// offsets: candidates found across a run of lines are confirmed on their
// line, ^ and $ hold at line ends, escape sequences do not hide a word.
func TestSearcherMatchesEachLineAlone(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "Compiling crate_%d v0.1.%d\n", i, i)
		case 1:
			fmt.Fprintf(&b, "\x1b[32mok\x1b[0m gr\x1b[1meen %d\n", i)
		case 2:
			b.WriteString("\n")
		case 3:
			fmt.Fprintf(&b, "progress 10%%\rprogress 100%% line %d\n", i)
		case 4:
			fmt.Fprintf(&b, "a\tb %d end LINE\n", i)
		default:
			fmt.Fprintf(&b, "crate_77 copy %d\n", i)
		}
	}
	b.WriteString("crate_77 unterminated last line")
	text := b.String()
	patterns := []string{`crate_77 `, `^$`, `^a`, `end$`, `green`, `progress 10%`, `100% line`, `a\nb`, `x*`, `\s\d+$`, `^Compiling crate_7\d{2} `, `(?i)OK`,
		`(?i)COMPILING|crate_77`, `^(crate_77 |a\tb)`, `(crate_7|Compiling) (v0|crate|copy)`, `\bcrate_77\b`, `0{3}(?i:Line)`, `(?i)progress 1`,
		`^(Compiling crate_1|Compiling crate_2)\d* v0\.1\.\d+$`, `(?i)COMPILING crate_1(?-i:0)`, `LINE`}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		want := naiveSearch(text, re)
		for trial := range 4 {
			s, err := newSearcher(p, 0, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			// Reads cut anywhere: in a line, in an escape sequence,
			// between \r and \n.
			for i := 0; i < len(text); {
				n := 1 + rng.IntN(700)
				if trial == 0 {
					n = len(text)
				}
				j := min(i+n, len(text))
				s.feed(text[i:j], int64(i), int64(strings.Count(text[:i], "\n"))+jobs.FirstLine)
				i = j
			}
			s.endLine()
			if got := s.res.Count; got != int64(len(want)) {
				t.Fatalf("%q, reads of trial %d: %d matches, want %d", p, trial, got, len(want))
			}
			for k, h := range s.res.Hits {
				if h.Line != want[k].Line || h.Offset != want[k].Offset {
					t.Fatalf("%q, trial %d: match %d at line %d offset %d, want line %d offset %d", p, trial, k, h.Line, h.Offset, want[k].Line, want[k].Offset)
				}
			}
		}
	}
}

// TestSearcherListsAfterAndCaps: the count covers every match; the list
// holds those after the line asked for, up to the cap, and says more
// follow.
func TestSearcherListsAfterAndCaps(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "line %d\n", i+1)
	}
	s, err := newSearcher(`line`, 40, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.feed(b.String(), 0, jobs.FirstLine)
	s.endLine()
	if s.res.Count != 100 || len(s.res.Hits) != 10 || !s.res.More {
		t.Fatalf("count %d, listed %d, more %v; want 100, 10, true", s.res.Count, len(s.res.Hits), s.res.More)
	}
	if got := s.res.Hits[0].Line; got != 41 {
		t.Fatalf("the list starts at line %d, want 41", got)
	}
	if _, err := newSearcher(`(`, 0, 10); err == nil || !strings.Contains(err.Error(), "regular expression") {
		t.Fatalf("a bad pattern gave %v", err)
	}
}

// TestSearcherBoundsALongLine: a line longer than maxSearchLine carried
// from read to read is kept to its first maxSearchLine bytes, tested
// there, and counted as cut.
func TestSearcherBoundsALongLine(t *testing.T) {
	s, err := newSearcher(`^x+needle`, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 64<<10)
	for range (3 * maxSearchLine) / len(chunk) {
		s.feed(chunk, 0, jobs.FirstLine)
		if len(s.carry) > maxSearchLine {
			t.Fatalf("the carried line holds %d bytes, more than %d", len(s.carry), maxSearchLine)
		}
	}
	s.feed("needle\nnext\n", 0, jobs.FirstLine)
	s.endLine()
	if s.res.Cut != 1 || s.res.Count != 0 {
		t.Fatalf("cut %d, count %d; want the long line cut and its far end unseen", s.res.Cut, s.res.Count)
	}
}

// TestLineRendererNumbersLines: each line is a span with its number and a
// link to it; a line continued by a later call is not numbered again; an
// escape sequence cut at the end waits for the rest.
func TestLineRendererNumbersLines(t *testing.T) {
	l := newLineRenderer(7, true, "&scope=s")
	html, n := l.render([]byte("one\n\x1b[31mtwo\nthr"), false)
	if n != 16 {
		t.Fatalf("consumed %d, want 16", n)
	}
	for _, want := range []string{
		`<span class="l" id="L7"><a class="n" href="?line=7&amp;scope=s#L7" data-n="7"></a>one` + "\n</span>",
		`<span class="l" id="L8"><a class="n" href="?line=8&amp;scope=s#L8" data-n="8"></a><span class="f1">two` + "\n</span></span>",
		`<span class="l" id="L9"><a class="n" href="?line=9&amp;scope=s#L9" data-n="9"></a><span class="f1">thr</span></span>`,
	} {
		if !strings.Contains(html, want) {
			t.Fatalf("rendered\n%s\nlacks\n%s", html, want)
		}
	}
	html, n = l.render([]byte("ee\x1b[0"), false)
	if n != 2 || html != `<span class="l c"><span class="f1">ee</span></span>` {
		t.Fatalf("a continued line rendered %q (%d bytes)", html, n)
	}
	html, _ = l.render([]byte("\x1b[0m<b>\nfour\n"), true)
	if !strings.Contains(html, "&lt;b&gt;") || !strings.Contains(html, `id="L10"`) || strings.Contains(html, `id="L9"`) {
		t.Fatalf("rendered %q", html)
	}
}

// TestSearcherRequiredStrings: the strings a search looks for before it
// tests a line: the pattern's literals, products of a few alternatives,
// lower case under (?i), none where a match needs no fixed text.
func TestSearcherRequiredStrings(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    string
		fold    bool
	}{
		{`crate_77 `, `crate_77 `, false},
		{`^(000000000065536|000000001048576)$`, `000000000065536 000000001048576`, false},
		{`(?i)ERROR`, `error`, true},
		{`\d{3}5536$`, `5536`, false},
		{`Err(or|no)+ at`, `Err`, false},
		{`x*`, ``, false},
		{`(?i)ok`, ``, false}, // k folds with the Kelvin sign
		{`a|\d`, ``, false},
	} {
		s, err := newSearcher(c.pattern, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.lits, " "); got != c.want || s.fold != c.fold {
			t.Errorf("%q: looks for %q (fold %v), want %q (fold %v)", c.pattern, got, s.fold, c.want, c.fold)
		}
	}
}

// TestAroundLineBoundsAPage: a jump to a line among long lines keeps a page
// of whole lines holding the line, with its offsets and number.
func TestAroundLineBoundsAPage(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "%03d %s\n", i+1, strings.Repeat("x", 995)) // 1000 bytes a line
	}
	in := jobs.Output{Text: b.String(), Start: 5000, FirstLine: 1, End: 5000 + int64(b.Len())}
	out := aroundLine(in, 50, 8000)
	if len(out.Text) > 8000 || !strings.HasSuffix(out.Text, "\n") {
		t.Fatalf("the page holds %d bytes, want at most 8000 of whole lines", len(out.Text))
	}
	first := int64(0)
	fmt.Sscanf(out.Text, "%d", &first)
	if first != out.FirstLine || first > 50 || first < 45 {
		t.Fatalf("the page starts with line %d, says %d; want a few lines before 50", first, out.FirstLine)
	}
	if want := 5000 + (first-1)*1000; out.Start != want || out.End != out.Start+int64(len(out.Text)) {
		t.Fatalf("the page covers %d-%d, want from %d", out.Start, out.End, want)
	}
	if !strings.Contains(out.Text, "050 x") {
		t.Fatal("the page lacks line 50")
	}
	if small := aroundLine(jobs.Output{Text: "a\nb\n", FirstLine: 1}, 2, 8000); small.Text != "a\nb\n" {
		t.Fatalf("a small page was cut: %q", small.Text)
	}
}

// TestJobPageLinksKeepTheScope: a job of another scope keeps its scope in
// every link of its page: the pager, the matches, the next matches.
func TestJobPageLinksKeepTheScope(t *testing.T) {
	s, _ := serve(t)
	d := jobData{Page: s.page("x", "job"), Job: jobs.Job{ID: "abc", Scope: "other one", Status: jobs.StatusDone}, State: "done",
		HasPrev: true, HasNext: true, ScopeArg: "?scope=other+one", ScopeAnd: "&scope=other+one",
		Search: &searchResult{Count: 1, Hits: []hit{{Line: 7, Text: "x"}}, More: true}, MoreLink: "?grep=x&after=7&scope=other+one"}
	html, err := s.fragment("job.html", d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`?offset=0&amp;scope=other%20one"`, `?line=7&amp;scope=other%20one#L7"`, `href="?grep=x&amp;after=7&amp;scope=other&#43;one"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(html)
	}
}
