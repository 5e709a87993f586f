package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// searches reports whether log's --grep searches the whole log: it does
// unless a byte range (--offset/--limit) or --stream chooses what to
// filter, which keeps their page-at-a-time meaning.
func searches(rg jobs.Range) bool {
	return rg.Grep != "" && !rg.ByteRange && rg.Stream == ""
}

// search prints the lines of the job's whole retained log that match
// rg.Grep, each after its line number (JSON: its line and byte offset),
// then says on stderr how many matched and what was not searched. --lines
// N prints the first N matches, --tail N the last N; every line is
// counted either way. --from-line starts the search at that line.
func (r *runner) search(cc *ucli.Context, c *jobs.Client, ref string, rg jobs.Range) error {
	ctx := cc.Context
	o := jobs.SearchOptions{Grep: rg.Grep}
	if rg.FromLine > jobs.FirstLine {
		at, err := c.Log(ctx, ref, jobs.Range{FromLine: rg.FromLine, Lines: 1})
		if err != nil {
			return err
		}
		o.From = at.Start
	}
	asJSON := jsonOut(cc)
	out := bufio.NewWriterSize(r.stdout, 64<<10)
	pt := r.paint()
	var (
		shown   int64
		ring    []jobs.Match // the last rg.TailLines matches, oldest at next
		next    int
		started bool
	)
	write := func(m jobs.Match) error {
		shown++
		if asJSON {
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			sep := ",\n    "
			if !started {
				sep, started = "{\n  \"matches\": [\n    ", true
			}
			_, err = out.Write(append([]byte(sep), escapeJSON(b)...))
			return err
		}
		text := m.Text
		if rg.Clean {
			text = textclean.Clean([]byte(text))
		}
		_, err := fmt.Fprintf(out, "%s%s\n", pt.dim(fmt.Sprintf("%d:", m.Line)), text)
		return err
	}
	each := func(m jobs.Match) error {
		switch {
		case rg.TailLines > 0:
			if int64(len(ring)) < rg.TailLines {
				ring = append(ring, m)
			} else {
				ring[next] = m
				next = (next + 1) % len(ring)
			}
			return nil
		case rg.Lines > 0 && shown >= rg.Lines:
			return nil // counted, not shown
		}
		return write(m)
	}
	var progress *searchProgress
	if isTerminal(r.stderrFile()) {
		progress = &searchProgress{w: r.stderr, start: time.Now()}
		o.Progress = progress.update
	}
	res, err := c.Search(ctx, ref, o, func(m jobs.Match) error {
		if progress != nil {
			progress.found()
		}
		return each(m)
	})
	progress.clear()
	if err != nil {
		return err
	}
	for i := range ring {
		if err := write(ring[(next+i)%len(ring)]); err != nil {
			return err
		}
	}
	if asJSON {
		if !started {
			if _, err := out.WriteString("{\n  \"matches\": ["); err != nil {
				return err
			}
		} else if _, err := out.WriteString("\n  "); err != nil {
			return err
		}
		b, err := json.MarshalIndent(struct {
			Shown int64 `json:"shown"`
			jobs.SearchResult
		}{shown, withGaps(res)}, "", "  ")
		if err != nil {
			return err
		}
		// The summary's fields follow the matches in the one object.
		if _, err := fmt.Fprintf(out, "],\n  %s", escapeJSON(bytes.TrimPrefix(b, []byte("{\n  ")))); err != nil {
			return err
		}
		if _, err := out.WriteString("\n"); err != nil {
			return err
		}
		return out.Flush()
	}
	if err := out.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(r.stderr, searchSummary(res, shown, rg))
	return nil
}

// withGaps makes an empty list of gaps [] in JSON, not null.
func withGaps(res jobs.SearchResult) jobs.SearchResult {
	if res.Gaps == nil {
		res.Gaps = []jobs.Gap{}
	}
	return res
}

// searchSummary is the line on stderr after a search: how many lines
// matched in how much, how many are shown, and what was not searched.
func searchSummary(res jobs.SearchResult, shown int64, rg jobs.Range) string {
	var parts []string
	where := fmt.Sprintf("%s searched", parse.FormatSize(res.Searched))
	if res.Start > 0 {
		where += fmt.Sprintf(" from byte %d", res.Start)
	}
	parts = append(parts, fmt.Sprintf("%s matched %s in %s", plural(res.Count, "line", "lines"), quoted(res.Grep), where))
	if shown < res.Count {
		how := fmt.Sprintf("the first %d (--lines)", shown)
		if rg.TailLines > 0 {
			how = fmt.Sprintf("the last %d (--tail)", shown)
		}
		parts = append(parts, "showing "+how)
	}
	var gap int64
	for _, g := range res.Gaps {
		gap += g.End - g.Start
	}
	if gap > 0 {
		g := res.Gaps[0]
		s := fmt.Sprintf("not searched: %s %s (bytes %d to %d", parse.FormatSize(gap), gapWords(res.EvictedTotal, res.DroppedTotal), g.Start, g.End)
		if len(res.Gaps) > 1 {
			s += fmt.Sprintf(" and %d more ranges", len(res.Gaps)-1)
		}
		parts = append(parts, s+")")
	}
	if res.CutLines > 0 {
		parts = append(parts, fmt.Sprintf("truncated: %s longer than %s searched and shown in part", plural(res.CutLines, "line", "lines"), parse.FormatSize(jobs.MaxGrepLine)))
	}
	if res.End < res.TotalBytes {
		parts = append(parts, fmt.Sprintf("output after byte %d came during the search and was not searched", res.End))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// searchProgress is a line on a terminal's stderr while a search that
// has taken more than a second goes on.
type searchProgress struct {
	mu      sync.Mutex
	w       interface{ Write([]byte) (int, error) }
	start   time.Time
	last    time.Time
	matches int64
	shown   bool
}

func (p *searchProgress) found() {
	p.mu.Lock()
	p.matches++
	p.mu.Unlock()
}

func (p *searchProgress) update(at, end int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	pct := int64(100)
	if end > 0 {
		pct = at * 100 / end
	}
	fmt.Fprintf(p.w, "\r\x1b[K[jobs: searching %d%% (%s of %s), %s so far]", pct, parse.FormatSize(at), parse.FormatSize(end), plural(p.matches, "match", "matches"))
	p.shown = true
}

func (p *searchProgress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
