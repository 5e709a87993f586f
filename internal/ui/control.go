package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// maxStdin caps what one stdin action sends: text typed into a form.
const maxStdin = 1 << 20

// The control actions (--allow-control) go through the public package like
// the CLI's kill, signal and write. ServeHTTP has checked their origin and
// token header.

func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	c, err := s.client(r.Context(), r.URL.Query().Get("scope"))
	if err != nil {
		fail(w, err)
		return
	}
	res, err := c.Kill(r.Context(), r.PathValue("id"), s.cfg.Grace)
	if err != nil {
		fail(w, err)
		return
	}
	answer(w, fmt.Sprintf("%s: signalled %d processes, %d survived", res.Status, len(res.Signalled), len(res.Survivors)), res)
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	c, err := s.client(r.Context(), r.URL.Query().Get("scope"))
	if err != nil {
		fail(w, err)
		return
	}
	sig := r.PostFormValue("signal")
	pids, err := c.Signal(r.Context(), r.PathValue("id"), sig)
	if err != nil {
		fail(w, err)
		return
	}
	answer(w, fmt.Sprintf("sent SIG%s to %d processes", strings.TrimPrefix(strings.ToUpper(sig), "SIG"), len(pids)), map[string]any{"signalled": pids})
}

func (s *Server) stdin(w http.ResponseWriter, r *http.Request) {
	c, err := s.client(r.Context(), r.URL.Query().Get("scope"))
	if err != nil {
		fail(w, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxStdin+4096)
	data := r.PostFormValue("data")
	eof := r.PostFormValue("eof") == "1"
	id := r.PathValue("id")
	written := 0
	if data != "" {
		if written, err = c.Write(r.Context(), id, []byte(data)); err != nil {
			fail(w, err)
			return
		}
	}
	if eof {
		if err := c.CloseStdin(r.Context(), id); err != nil {
			fail(w, err)
			return
		}
	}
	msg := fmt.Sprintf("wrote %d bytes", written)
	if eof {
		msg += " and closed stdin"
	}
	answer(w, msg, map[string]any{"bytes": written, "eof": eof})
}

// restart starts a new job like this one (jobs restart); the answer names
// it, and the page opens it.
func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	c, err := s.client(r.Context(), r.URL.Query().Get("scope"))
	if err != nil {
		fail(w, err)
		return
	}
	j, err := c.Restart(r.Context(), r.PathValue("id"), nil)
	if err != nil {
		fail(w, err)
		return
	}
	answer(w, fmt.Sprintf("restarted as %s (%s)", j.ID, j.Status), map[string]any{"id": j.ID, "status": j.Status})
}

// answer writes an action's result as JSON: a sentence for the page and
// the details.
func answer(w http.ResponseWriter, msg string, detail any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "result": detail})
}
