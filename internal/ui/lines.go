package ui

import (
	"bytes"
	"html"
	"strconv"
	"strings"
)

// lineRenderer renders output a line at a time: each line is a span with
// the id L<number> (so #L123 opens it) holding a link to itself by line
// number. The number is drawn from the link's data attribute by the
// stylesheet, so the log's text (copied, searched) is the output alone.
// Numbers are those of the stored lines, counted by newline: a carriage
// return redraw that the renderer shows on a row of its own stays within
// its line.
type lineRenderer struct {
	r       *renderer
	next    int64  // the number of the line the next byte belongs to
	atStart bool   // the next byte begins a line
	query   string // appended to each line's link (the job's scope), HTML-escaped
}

func newLineRenderer(first int64, atStart bool, query string) *lineRenderer {
	return &lineRenderer{r: newRenderer(), next: first, atStart: atStart, query: html.EscapeString(query)}
}

// resync starts a new line numbered n: after bytes that are not stored,
// where the store says which line comes next.
func (l *lineRenderer) resync(n int64) { l.next, l.atStart = n, true }

// render converts data as renderer.render does, returning the HTML and the
// bytes consumed.
func (l *lineRenderer) render(data []byte, final bool) (string, int) {
	var b strings.Builder
	done := 0
	for done < len(data) {
		seg := data[done:]
		full := false
		if i := bytes.IndexByte(seg, '\n'); i >= 0 {
			seg, full = seg[:i+1], true
		}
		text, n := l.r.render(seg, final || full)
		if n == 0 {
			break // a sequence cut at the very start: wait for the rest
		}
		if l.atStart {
			num := strconv.FormatInt(l.next, 10)
			b.WriteString(`<span class="l" id="L` + num + `"><a class="n" href="?line=` + num + l.query + `#L` + num + `" data-n="` + num + `"></a>`)
		} else {
			b.WriteString(`<span class="l c">`)
		}
		b.WriteString(text)
		b.WriteString("</span>")
		done += n
		if full && n == len(seg) {
			l.next++
			l.atStart = true
		} else {
			l.atStart = false
			if n < len(seg) {
				break // a sequence cut at the end: wait for the rest
			}
		}
	}
	return b.String(), done
}
