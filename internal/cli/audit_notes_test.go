package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// jobNotes returns the messages of the notes on a job's events (by its
// full id, which selects a deleted job's history too).
func jobNotes(t *testing.T, e *env, id string) []string {
	t.Helper()
	var notes []string
	for _, line := range strings.Split(strings.TrimSpace(e.ok("events", "--job", id)), "\n") {
		var ev struct {
			Kind   string `json:"kind"`
			Detail struct {
				Message string `json:"message"`
				By      string `json:"by"`
			} `json:"detail"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if ev.Kind == "note" {
			m := ev.Detail.Message
			if ev.Detail.By != "" {
				m += " by " + ev.Detail.By
			}
			notes = append(notes, m)
		}
	}
	return notes
}

// TestAuditNotesPauseResumeRemove: pause, resume and rm leave notes on the
// job's audit trail, which outlives the job.
func TestAuditNotesPauseResumeRemove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("sleep 60")
	e.ok("pause", id)
	e.ok("resume", id)
	e.ok("rm", id)
	got := strings.Join(jobNotes(t, e, id), ", ")
	if want := "paused, resumed, deleted by rm"; got != want {
		t.Errorf("notes %q, want %q", got, want)
	}
}

// TestAuditNoteTTL: a job deleted when its ttl passed leaves a note that
// says so.
func TestAuditNoteTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.start("--ttl", "1ms", "true")
	eventually(t, 30*time.Second, "the job deleted after its ttl", func() bool {
		e.ok("gc")
		return e.run2("status", id).code != 0
	})
	got := strings.Join(jobNotes(t, e, id), ", ")
	if want := "deleted by ttl"; got != want {
		t.Errorf("notes %q, want %q", got, want)
	}
}
