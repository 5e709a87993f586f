package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// pageBytes is how much output a job page shows at once: a page of a 1 GiB
// log costs what a page of a small one does, since reads are indexed by
// offset.
const pageBytes = 64 << 10

// listLimit caps the jobs a list or timeline shows.
const listLimit = 300

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.listPage)
	m.HandleFunc("GET /list.sse", s.listStream)
	m.HandleFunc("GET /job/{id}", s.jobPage)
	m.HandleFunc("GET /job/{id}/out.sse", s.jobStream)
	m.HandleFunc("GET /timeline", s.timelinePage)
	m.HandleFunc("GET /timeline.sse", s.timelineStream)
	m.HandleFunc("GET /static/app.css", s.static("text/css; charset=utf-8"))
	m.HandleFunc("GET /static/app.js", s.static("text/javascript; charset=utf-8"))
	m.HandleFunc("GET /", s.notFound)
	if s.cfg.AllowControl {
		m.HandleFunc("POST /job/{id}/kill", s.kill)
		m.HandleFunc("POST /job/{id}/signal", s.signal)
		m.HandleFunc("POST /job/{id}/stdin", s.stdin)
		m.HandleFunc("POST /job/{id}/restart", s.restart)
	}
	s.mux = m
}

func (s *Server) static(ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		if strings.HasSuffix(r.URL.Path, ".css") {
			_, _ = w.Write([]byte(s.css))
			return
		}
		b, err := fs.ReadFile(assets, "assets/app.js")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	}
}

// page is what every page template gets.
type Page struct {
	Title        string
	Base         string // the token prefix of every link
	Token        string // for the X-Jobs-Token header of actions
	Scope        string
	AllScopes    bool
	AllowControl bool
	Nav          string // which page: list, job, timeline
	Stream       string // the event stream the page follows, if any
}

func (s *Server) page(title, nav string) Page {
	return Page{
		Title: title, Base: s.base(), Token: s.cfg.Token, Scope: s.cfg.Client.Scope(),
		AllScopes: s.cfg.AllScopes, AllowControl: s.cfg.AllowControl, Nav: nav,
	}
}

// render executes a template into a buffer first, so that an error never
// leaves half a page.
func (s *Server) render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "jobs ui: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fragment(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// fail answers an error of a read or an action in one line.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, jobs.ErrInvalid):
		code = http.StatusBadRequest
	}
	http.Error(w, "jobs ui: "+clip(err.Error()), code)
}

// errorData is what an error page shows.
type errorData struct {
	Page
	Code    int
	Message string
	Back    string // where the link back goes
	BackTo  string // what it is called
}

// failPage answers a page's error with a page: the layout, the reason in
// one line and a link back (to the job when back names one, else the
// list).
func (s *Server) failPage(w http.ResponseWriter, err error, back, backTo string) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, jobs.ErrInvalid):
		code = http.StatusBadRequest
	}
	if back == "" {
		back, backTo = s.base()+"/", "the list of jobs"
	}
	d := errorData{Page: s.page(http.StatusText(code), ""), Code: code, Message: clip(err.Error()), Back: back, BackTo: backTo}
	var b bytes.Buffer
	if terr := s.tmpl.ExecuteTemplate(&b, "error.html", d); terr != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.failPage(w, fmt.Errorf("%w: no such page %s", jobs.ErrNotFound, clip(r.URL.Path)), "", "")
}

// row is one job in the list.
type row struct {
	jobs.Job
	Link     string
	Title    string // name, else id
	Runtime  string
	Size     string
	Rate     string
	LastLine string
	Procs    string
}

// lister builds the list's rows. It remembers each job's output size and
// last line between calls, so a refresh reads the last line only of the
// jobs that wrote since, and reports their rate.
type lister struct {
	s     *Server
	q     listQuery
	last  map[string]lastSeen
	prevT time.Time
}

type lastSeen struct {
	bytes int64
	line  string
}

func newLister(s *Server, q listQuery) *lister {
	return &lister{s: s, q: q, last: map[string]lastSeen{}}
}

func (l *lister) rows(ctx context.Context) ([]row, error) {
	js, err := l.q.list(ctx, l.s.cfg.Client, l.s.cfg.AllScopes)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	elapsed := now.Sub(l.prevT)
	next := make(map[string]lastSeen, len(js))
	out := make([]row, 0, len(js))
	for _, j := range js {
		seen, ok := l.last[j.ID]
		if !ok || seen.bytes != j.OutputBytes {
			seen.line = l.lastLine(ctx, j)
		}
		rate := ""
		if ok && !l.prevT.IsZero() && elapsed > 0 && !j.Status.Terminal() {
			rate = parse.FormatSize(int64(float64(j.OutputBytes-seen.bytes)/elapsed.Seconds())) + "/s"
		}
		seen.bytes = j.OutputBytes
		next[j.ID] = seen
		out = append(out, row{
			Job: j, Link: l.s.jobLink(j), Title: title(j), Runtime: duration(j.Runtime),
			Size: parse.FormatSize(j.OutputBytes), Rate: rate, LastLine: seen.line, Procs: procs(j),
		})
	}
	l.last, l.prevT = next, now
	return out, nil
}

// lastLine is the job's last line of output, cleaned of escape codes.
func (l *lister) lastLine(ctx context.Context, j jobs.Job) string {
	if j.OutputBytes == 0 {
		return ""
	}
	text, err := l.s.cfg.Client.LastLines(ctx, j, 1)
	if err != nil {
		return ""
	}
	line := strings.TrimRight(text, "\n")
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	return visible(shorten(line, 300))
}

func (s *Server) jobLink(j jobs.Job) string {
	link := s.base() + "/job/" + j.ID
	if j.Scope != s.cfg.Client.Scope() {
		link += "?scope=" + urlQueryEscape(j.Scope)
	}
	return link
}

// title names a job for people: its name (control characters made
// visible), else its id.
func title(j jobs.Job) string {
	if j.Name != "" {
		return visible(j.Name)
	}
	return j.ID
}

// procs says which of the job's processes are alive.
func procs(j jobs.Job) string {
	switch {
	case j.Status == jobs.StatusRunning && j.Descendants > 0:
		return fmt.Sprintf("main exited, %d left", j.Descendants)
	case j.Status == jobs.StatusRunning:
		return "main"
	case j.Descendants > 0:
		return fmt.Sprintf("%d left", j.Descendants)
	}
	return "none"
}

type listData struct {
	Page
	Rows     []row
	Query    listQuery
	Statuses []string
	Sorts    [][2]string
}

func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		s.failPage(w, err, "", "")
		return
	}
	rows, err := newLister(s, q).rows(r.Context())
	if err != nil {
		s.failPage(w, err, "", "")
		return
	}
	p := s.page("jobs", "list")
	p.Stream = s.base() + "/list.sse"
	if e := q.encode(); e != "" {
		p.Stream += "?" + e
	}
	s.render(w, "list.html", listData{Page: p, Rows: rows, Query: q, Statuses: statusChoices, Sorts: sortChoices})
}

func (s *Server) listStream(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		fail(w, err)
		return
	}
	l := newLister(s, q)
	s.stream(w, r, 250*time.Millisecond, func(ctx context.Context, send sender) (bool, error) {
		rows, err := l.rows(ctx)
		if err != nil {
			return false, err
		}
		html, err := s.fragment("rows", listData{Page: s.page("", "list"), Rows: rows, Query: q})
		if err != nil {
			return false, err
		}
		return false, send.changed("rows", html)
	})
}

// jobData is what the job page shows.
type jobData struct {
	Page
	Job      jobs.Job
	State    string // the status, or paused
	Meta     template.HTML
	Output   template.HTML
	Start    int64
	End      int64
	Total    int64
	Evicted  int64
	Follow   bool // the page shows the end and follows new output
	Grep     string
	Search   *searchResult
	MoreLink string // the next page of matches
	Offset   string
	Line     string // the line asked for
	Prev     int64
	Next     int64
	Middle   int64
	HasPrev  bool
	HasNext  bool
	Signals  []string
	ScopeArg string // "?scope=…" when the job is of another scope
	ScopeAnd string // "&scope=…" likewise
}

// lineContext is how many lines a jump to a line shows before it, and
// lineSpan how many it reads in all (a bounded read: at most
// jobs.MaxPageBytes).
const (
	lineContext = 200
	lineSpan    = 1000
)

// metaData is the part of the job page that updates as the job runs.
type metaData struct {
	Job     jobs.Job
	Events  []eventRow
	Runtime string
	Size    string
	Procs   string
}

type eventRow struct {
	jobs.Event
	At     string
	Detail string
}

func (s *Server) meta(ctx context.Context, c *jobs.Client, j jobs.Job) (string, error) {
	evs, err := c.History(ctx, j.ID)
	if err != nil {
		return "", err
	}
	rows := make([]eventRow, 0, len(evs))
	for _, e := range evs {
		rows = append(rows, eventRow{Event: e, At: e.At.Local().Format("2006-01-02 15:04:05.000"), Detail: string(e.Detail)})
	}
	return s.fragment("meta", metaData{Job: j, Events: rows, Runtime: duration(j.Runtime), Size: parse.FormatSize(j.OutputBytes), Procs: procs(j)})
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	scope := q.Get("scope")
	c, err := s.client(ctx, scope)
	if err != nil {
		s.failPage(w, err, "", "")
		return
	}
	j, err := c.Get(ctx, r.PathValue("id"))
	if err != nil {
		s.failPage(w, err, "", "")
		return
	}
	d := jobData{Page: s.page(title(j), "job"), Job: j, State: state(j), Total: j.OutputBytes, Signals: signalChoices}
	if scope != "" {
		d.ScopeArg = "?scope=" + urlQueryEscape(scope)
		d.ScopeAnd = "&scope=" + urlQueryEscape(scope)
	}
	back := s.base() + "/job/" + j.ID + d.ScopeArg
	bad := func(err error) { s.failPage(w, err, back, "the job's page") }
	meta, err := s.meta(ctx, c, j)
	if err != nil {
		bad(err)
		return
	}
	d.Meta = template.HTML(meta)
	d.Middle = j.OutputBytes / 2
	var out jobs.Output
	switch {
	case q.Get("grep") != "":
		d.Grep = q.Get("grep")
		after, perr := strconv.ParseInt(q.Get("after"), 10, 64)
		if q.Get("after") != "" && (perr != nil || after < 0) {
			bad(fmt.Errorf("%w: after %q is not a line number", jobs.ErrInvalid, clip(q.Get("after"))))
			return
		}
		res, err := search(ctx, c, j.ID, d.Grep, after, searchShown)
		if err != nil {
			bad(err)
			return
		}
		d.Search = &res
		if res.More && len(res.Hits) > 0 {
			d.MoreLink = "?grep=" + urlQueryEscape(d.Grep) + "&after=" + strconv.FormatInt(res.Hits[len(res.Hits)-1].Line, 10) + d.ScopeAnd
		}
		s.render(w, "job.html", d)
		return
	case q.Get("line") != "":
		d.Line = q.Get("line")
		n, perr := strconv.ParseInt(d.Line, 10, 64)
		if perr != nil || n < jobs.FirstLine {
			bad(fmt.Errorf("%w: line %q is not a line number (lines count from %d)", jobs.ErrInvalid, clip(d.Line), jobs.FirstLine))
			return
		}
		out, err = c.Log(ctx, j.ID, jobs.Range{FromLine: max(n-lineContext, jobs.FirstLine), Lines: lineSpan})
		if err == nil {
			// Long lines: the page keeps pageBytes around the line.
			out = aroundLine(out, n, pageBytes)
		}
	case q.Get("offset") != "":
		d.Offset = q.Get("offset")
		off, perr := strconv.ParseInt(d.Offset, 10, 64)
		if perr != nil || off < 0 {
			bad(fmt.Errorf("%w: offset %q is not a byte offset", jobs.ErrInvalid, clip(d.Offset)))
			return
		}
		off = min(off, j.OutputBytes)
		out, err = c.Log(ctx, j.ID, jobs.Range{ByteRange: true, Offset: off, Limit: pageBytes})
	default:
		d.Follow = true
		out, err = c.Log(ctx, j.ID, jobs.Range{ByteRange: true, Offset: max(j.OutputBytes-pageBytes, 0), Limit: pageBytes})
	}
	if err != nil {
		bad(err)
		return
	}
	lr := newLineRenderer(out.FirstLine, true, d.ScopeAnd)
	html, _ := lr.render([]byte(out.Text), true)
	d.Output = template.HTML(html) // escaped by the renderer: text becomes entities, colours spans
	d.Start, d.End, d.Evicted = out.Start, out.End, out.Evicted
	d.Prev = max(out.Start-pageBytes, 0)
	d.HasPrev = out.Start > 0
	d.Next = out.End
	d.HasNext = out.End < j.OutputBytes
	if d.Follow {
		// The stream goes on numbering where the page stops.
		p := s.base() + "/job/" + j.ID + "/out.sse?from=" + strconv.FormatInt(out.End, 10) + "&line=" + strconv.FormatInt(lr.next, 10)
		if !lr.atStart {
			p += "&mid=1"
		}
		d.Stream = p + d.ScopeAnd
	}
	s.render(w, "job.html", d)
}

// aroundLine cuts a page read by lines to at most size bytes of whole
// lines: from the line a quarter of size before line n's start on, so a
// jump to a line shows what led to it and what follows whatever the lines'
// lengths.
func aroundLine(out jobs.Output, n int64, size int) jobs.Output {
	text := out.Text
	if len(text) <= size {
		return out
	}
	// The start of line n in text: after its (n - FirstLine)th newline.
	at := 0
	for k := out.FirstLine; k < n; k++ {
		i := strings.IndexByte(text[at:], '\n')
		if i < 0 {
			break
		}
		at += i + 1
	}
	from := 0
	if at > size/4 {
		from = strings.IndexByte(text[at-size/4:at], '\n') + at - size/4 + 1
		if from <= at-size/4 {
			from = at // one line longer than a quarter page before it
		}
	}
	to := min(from+size, len(text))
	if i := strings.LastIndexByte(text[from:to], '\n'); i >= 0 && to < len(text) && from+i+1 > at {
		to = from + i + 1
	}
	out.FirstLine += int64(strings.Count(text[:from], "\n"))
	out.Start += int64(from)
	out.End = out.Start + int64(to-from)
	out.Lines = int64(strings.Count(text[from:to], "\n"))
	out.Text = text[from:to]
	return out
}

// jobStream follows one job: its output from ?from= on (event "out", HTML)
// and its metadata (event "meta"), until the job has ended and all its
// output is sent (event "end").
func (s *Server) jobStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := s.client(ctx, r.URL.Query().Get("scope"))
	if err != nil {
		fail(w, err)
		return
	}
	off, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	if err != nil || off < 0 {
		fail(w, fmt.Errorf("%w: from must be a byte offset", jobs.ErrInvalid))
		return
	}
	line, err := strconv.ParseInt(r.URL.Query().Get("line"), 10, 64)
	if err != nil || line < jobs.FirstLine {
		line = jobs.FirstLine
	}
	id := r.PathValue("id")
	rd := newLineRenderer(line, r.URL.Query().Get("mid") != "1", scopeAnd(r.URL.Query().Get("scope")))
	s.stream(w, r, 100*time.Millisecond, func(ctx context.Context, send sender) (bool, error) {
		j, err := c.Get(ctx, id)
		if err != nil {
			return false, err
		}
		// Read at most a few pages a turn so the metadata keeps up.
		for range 16 {
			if off >= j.OutputBytes {
				break
			}
			out, err := c.Log(ctx, j.ID, jobs.Range{ByteRange: true, Offset: off, Limit: 256 << 10})
			if err != nil {
				return false, err
			}
			data := []byte(out.Text)
			final := j.Status.Terminal() && out.End >= j.OutputBytes
			gap := ""
			if out.Start > off && out.Evicted > 0 {
				// Lines start again after the gap where the store says.
				gap = `<span class="gap">[` + strconv.FormatInt(out.Evicted, 10) + " bytes evicted by the output cap]</span>\n"
				rd.resync(out.FirstLine)
			}
			html, n := rd.render(data, final)
			html = gap + html
			if html != "" {
				if err := send.event("out", html); err != nil {
					return false, err
				}
			}
			next := out.Start + int64(n)
			if next <= off && !final {
				break // a sequence cut at the end: wait for the rest
			}
			off = max(next, off)
			if final {
				off = j.OutputBytes
			}
		}
		meta, err := s.meta(ctx, c, j)
		if err != nil {
			return false, err
		}
		if err := send.changed("meta", meta); err != nil {
			return false, err
		}
		if j.Status.Terminal() && off >= j.OutputBytes {
			return true, send.event("end", string(j.Status))
		}
		return false, nil
	})
}

// scopeAnd is the query parameter naming a job's scope, after another.
func scopeAnd(scope string) string {
	if scope == "" {
		return ""
	}
	return "&scope=" + urlQueryEscape(scope)
}

// signalChoices are the signals the control form offers.
var signalChoices = []string{"INT", "TERM", "HUP", "KILL", "STOP", "CONT", "USR1", "USR2", "QUIT"}

// duration renders a runtime for people.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"size":     parse.FormatSize,
	"duration": duration,
	"when": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"time": func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"deref": func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	},
	"join":  func(s []string, sep string) string { return visible(strings.Join(s, sep)) },
	"vis":   visible,
	"state": state,
}
