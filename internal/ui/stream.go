package ui

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// sender writes server-sent events on one response.
type sender struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last map[string]string // the last data of each event, for changed
	sent *time.Time
}

// event sends one event; data may hold newlines (one data: line each).
func (s sender) event(name, data string) error {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	if _, err := s.w.Write([]byte(b.String())); err != nil {
		return err
	}
	*s.sent = time.Now()
	return s.rc.Flush()
}

// changed sends the event only when its data differs from the last sent.
func (s sender) changed(name, data string) error {
	if s.last[name] == data {
		return nil
	}
	s.last[name] = data
	return s.event(name, data)
}

// heartbeat is how often an idle stream sends a comment, so that a proxy or
// the browser does not take it for dead.
const heartbeat = 15 * time.Second

// stream serves an event stream: it calls look at once and then whenever
// the database may have changed, at most once per gap and at least once a
// second (conditions that need no write, such as a runtime, still move).
// While nothing changes that is one look a second. look returns done when
// the stream has nothing more to say; the stream then stays open, quiet,
// so the browser does not reconnect, until the page goes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, gap time.Duration, look func(context.Context, sender) (bool, error)) {
	ctx := r.Context()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sent := time.Now()
	snd := sender{w: w, rc: rc, last: map[string]string{}, sent: &sent}
	if err := snd.event("hello", "ok"); err != nil {
		return
	}
	ch := s.cfg.Client.Changes()
	defer ch.Close()
	done := false
	for {
		if !done {
			before := time.Now()
			s.looks.Add(1)
			var err error
			done, err = look(ctx, snd)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					return
				}
				if snd.event("failure", clip(err.Error())) != nil {
					return
				}
			}
			if wait := gap - time.Since(before); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		d := time.Second
		if done {
			d = heartbeat
		}
		if err := ch.Wait(ctx, d); err != nil {
			return
		}
		if time.Since(sent) >= heartbeat {
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			sent = time.Now()
			if rc.Flush() != nil {
				return
			}
		}
	}
}
