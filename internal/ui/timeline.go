package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// The timeline's drawing area, in SVG user units.
const (
	tlLabel = 180 // the column of job names
	tlWidth = 1000
	tlRow   = 20
	tlTop   = 24 // the hour axis
)

// bar is one job on the timeline.
type bar struct {
	Link, Label, Status, Tip string
	X, Y, W                  float64
	TextY                    float64
}

type tick struct {
	X     float64
	Label string
}

// dayBar is one day of the jobs-per-day chart: a stack of outcome segments.
type dayBar struct {
	Label    string
	X, W     float64
	Segments []segment
	Total    int64
	TotalY   float64
}

type segment struct {
	Status string
	Y, H   float64
	Tip    string
}

type timelineData struct {
	Page
	Span    span
	Auto    bool
	Window  string // the window shown, for people
	Choices []span
	Bars    []bar
	Ticks   []tick
	Height  float64
	Width   float64
	Left    float64
	Days    []dayBar
	DaysW   float64
	Legend  []string
	Empty   bool
	NoDays  bool
}

// span is the width of the timeline's window, in minutes.
type span int

func (m span) String() string {
	switch {
	case m%(24*60) == 0:
		return strconv.Itoa(int(m)/(24*60)) + "d"
	case m%60 == 0:
		return strconv.Itoa(int(m)/60) + "h"
	}
	return strconv.Itoa(int(m)) + "m"
}

var spanChoices = []span{1, 5, 15, 60, 3 * 60, 6 * 60, 24 * 60, 3 * 24 * 60, 7 * 24 * 60}

// span reads ?span= (minutes); 0 means the smallest window that holds the
// jobs of the last day.
func (s *Server) span(r *http.Request) span {
	m, err := strconv.Atoi(r.URL.Query().Get("span"))
	if err != nil || m < 1 {
		return 0
	}
	return span(min(m, 31*24*60))
}

// autoWindow reaches back to the start of the oldest job that ran within
// the last day, with some room on the left: a few quick jobs fill the
// picture as a day of them does.
func autoWindow(js []jobs.Job, now time.Time) time.Duration {
	oldest := now
	for _, j := range js {
		start := j.CreatedAt
		if j.StartedAt != nil {
			start = *j.StartedAt
		}
		if j.EndedAt != nil && now.Sub(*j.EndedAt) > 24*time.Hour {
			continue
		}
		if start.Before(oldest) {
			oldest = start
		}
	}
	return max(now.Sub(oldest)*11/10, 2*time.Second)
}

// timeline lays out the jobs that ran in the window, oldest at the top, and
// the jobs per day of the last two weeks by outcome.
func (s *Server) timeline(ctx context.Context, choice span) (timelineData, error) {
	d := timelineData{Page: s.page("timeline", "timeline"), Span: choice, Choices: spanChoices, Left: tlLabel, Width: tlLabel + tlWidth}
	d.Legend = []string{"running", "done", "failed", "killed", "timed_out", "lost"}
	js, err := s.cfg.Client.List(ctx, jobs.Filter{AllScopes: s.cfg.AllScopes, Limit: listLimit})
	if err != nil {
		return d, err
	}
	now := time.Now()
	window := time.Duration(choice) * time.Minute
	if d.Span == 0 {
		window, d.Auto = autoWindow(js, now), true
	}
	d.Window = duration(window.Round(time.Second))
	from := now.Add(-window)
	secs := now.Sub(from).Seconds()
	x := func(t time.Time) float64 {
		v := t.Sub(from).Seconds() / secs * tlWidth
		return tlLabel + min(max(v, 0), tlWidth)
	}
	var ran []jobs.Job
	for i := len(js) - 1; i >= 0; i-- { // List is newest first
		j := js[i]
		start := j.CreatedAt
		if j.StartedAt != nil {
			start = *j.StartedAt
		}
		end := now
		if j.EndedAt != nil {
			end = *j.EndedAt
		}
		if end.Before(from) || start.After(now) {
			continue
		}
		ran = append(ran, j)
	}
	for i, j := range ran {
		start := j.CreatedAt
		if j.StartedAt != nil {
			start = *j.StartedAt
		}
		end := now
		if j.EndedAt != nil {
			end = *j.EndedAt
		}
		x0, x1 := x(start), x(end)
		y := float64(tlTop + i*tlRow)
		label := title(j)
		if s.cfg.AllScopes {
			label = visible(j.Scope) + "/" + label
		}
		d.Bars = append(d.Bars, bar{
			Link: s.jobLink(j), Label: shorten(label, 26), Status: string(j.Status),
			Tip: fmt.Sprintf("%s · %s · %s · %s", label, j.Status, duration(j.Runtime), shorten(visible(j.Command), 120)),
			X:   x0, W: max(x1-x0, 3), Y: y + 3, TextY: y + 14,
		})
	}
	d.Empty = len(d.Bars) == 0
	d.Height = float64(tlTop + max(len(ran), 1)*tlRow + 4)
	step := tickStep(window)
	for t := from.Truncate(step).Add(step); t.Before(now); t = t.Add(step) {
		label := t.Local().Format("15:04")
		switch {
		case step < time.Minute:
			label = t.Local().Format("15:04:05")
		case step >= 24*time.Hour:
			label = t.Local().Format("Jan 2")
		}
		d.Ticks = append(d.Ticks, tick{X: x(t), Label: label})
	}
	days, err := s.cfg.Client.Daily(ctx, 14, s.cfg.AllScopes)
	if err != nil {
		return d, err
	}
	d.Days, d.DaysW = dayBars(days)
	d.NoDays = len(days) == 0
	return d, nil
}

// tickStep spaces the time axis's ticks: at most a dozen across.
func tickStep(window time.Duration) time.Duration {
	for _, step := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour} {
		if window/step <= 12 {
			return step
		}
	}
	return 24 * time.Hour
}

// The jobs-per-day chart's geometry.
const (
	dayW      = 44
	dayGap    = 12
	dayHeight = 160
	dayTop    = 18
)

func dayBars(days []jobs.Day) ([]dayBar, float64) {
	var top int64 = 1
	for _, d := range days {
		top = max(top, d.Done+d.Failed+d.Killed+d.TimedOut+d.Lost)
	}
	var out []dayBar
	for i, d := range days {
		b := dayBar{Label: d.Day[5:], X: float64(i*(dayW+dayGap) + dayGap), W: dayW}
		y := float64(dayTop + dayHeight)
		for _, s := range []struct {
			status string
			n      int64
		}{{"done", d.Done}, {"failed", d.Failed}, {"killed", d.Killed}, {"timed_out", d.TimedOut}, {"lost", d.Lost}} {
			if s.n == 0 {
				continue
			}
			h := float64(s.n) / float64(top) * dayHeight
			y -= h
			b.Segments = append(b.Segments, segment{Status: s.status, Y: y, H: h, Tip: fmt.Sprintf("%s: %d %s", d.Day, s.n, s.status)})
			b.Total += s.n
		}
		b.TotalY = y - 4
		out = append(out, b)
	}
	return out, float64(max(len(days), 1)*(dayW+dayGap) + dayGap)
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func (s *Server) timelinePage(w http.ResponseWriter, r *http.Request) {
	want := s.span(r)
	d, err := s.timeline(r.Context(), want)
	if err != nil {
		s.failPage(w, err, "", "")
		return
	}
	d.Stream = s.base() + "/timeline.sse?span=" + strconv.Itoa(int(want))
	s.render(w, "timeline.html", d)
}

func (s *Server) timelineStream(w http.ResponseWriter, r *http.Request) {
	want := s.span(r)
	s.stream(w, r, time.Second, func(ctx context.Context, send sender) (bool, error) {
		d, err := s.timeline(ctx, want)
		if err != nil {
			return false, err
		}
		html, err := s.fragment("charts", d)
		if err != nil {
			return false, err
		}
		return false, send.changed("charts", html)
	})
}
