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
	Hours   int
	Choices []int
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

var hourChoices = []int{1, 3, 6, 12, 24, 72, 168}

func (s *Server) hours(r *http.Request) int {
	h, err := strconv.Atoi(r.URL.Query().Get("hours"))
	if err != nil || h < 1 {
		return 6
	}
	return min(h, 24*31)
}

// timeline lays out the jobs that ran in the last hours, oldest at the top,
// and the jobs per day of the last two weeks by outcome.
func (s *Server) timeline(ctx context.Context, hours int) (timelineData, error) {
	d := timelineData{Page: s.page("timeline", "timeline"), Hours: hours, Choices: hourChoices, Left: tlLabel, Width: tlLabel + tlWidth}
	d.Legend = []string{"running", "done", "failed", "killed", "timed_out", "lost"}
	js, err := s.cfg.Client.List(ctx, jobs.Filter{AllScopes: s.cfg.AllScopes, Limit: listLimit})
	if err != nil {
		return d, err
	}
	now := time.Now()
	from := now.Add(-time.Duration(hours) * time.Hour)
	span := now.Sub(from).Seconds()
	x := func(t time.Time) float64 {
		v := t.Sub(from).Seconds() / span * tlWidth
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
		if end.Before(from) {
			continue
		}
		_ = start
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
			label = j.Scope + "/" + label
		}
		d.Bars = append(d.Bars, bar{
			Link: s.jobLink(j), Label: shorten(label, 26), Status: string(j.Status),
			Tip: fmt.Sprintf("%s · %s · %s · %s", label, j.Status, duration(j.Runtime), shorten(j.Command, 120)),
			X:   x0, W: max(x1-x0, 2), Y: y + 3, TextY: y + 14,
		})
	}
	d.Empty = len(d.Bars) == 0
	d.Height = float64(tlTop + max(len(ran), 1)*tlRow + 4)
	step := tickStep(hours)
	for t := from.Truncate(step).Add(step); t.Before(now); t = t.Add(step) {
		label := t.Local().Format("15:04")
		if step >= 24*time.Hour {
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

func tickStep(hours int) time.Duration {
	switch {
	case hours <= 1:
		return 10 * time.Minute
	case hours <= 6:
		return time.Hour
	case hours <= 24:
		return 3 * time.Hour
	case hours <= 72:
		return 12 * time.Hour
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
	d, err := s.timeline(r.Context(), s.hours(r))
	if err != nil {
		fail(w, err)
		return
	}
	d.Stream = s.base() + "/timeline.sse?hours=" + strconv.Itoa(d.Hours)
	s.render(w, "timeline.html", d)
}

func (s *Server) timelineStream(w http.ResponseWriter, r *http.Request) {
	hours := s.hours(r)
	s.stream(w, r, time.Second, func(ctx context.Context, send sender) (bool, error) {
		d, err := s.timeline(ctx, hours)
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
