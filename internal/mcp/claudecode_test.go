package mcp

import (
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestClaudeRuntime: the document's runtime words, 42s, 3m 5s, 2h 10m.
func TestClaudeRuntime(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{60 * time.Second, "1m 0s"},
		{3*time.Minute + 5*time.Second, "3m 5s"},
		{59*time.Minute + 59*time.Second, "59m 59s"},
		{time.Hour, "1h 0m"},
		{2*time.Hour + 10*time.Minute + 59*time.Second, "2h 10m"},
	} {
		if got := claudeRuntime(c.d); got != c.want {
			t.Errorf("claudeRuntime(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestClaudeCut: a read ends after the window's last newline, whichever
// stream wrote it; without one it passes a window short of the end (a
// long line) and waits at the end (a line being written).
func TestClaudeCut(t *testing.T) {
	segs := []jobs.Segment{
		{Stream: jobs.Stdout, Offset: 10, Text: "a\nb"},
		{Stream: jobs.Stderr, Offset: 13, Text: "e\n"},
		{Stream: jobs.Stdout, Offset: 15, Text: "cc"},
	}
	if got := claudeCut(segs, 10, 17, 17); got != 15 {
		t.Errorf("cut = %d, want 15 (after stderr's newline)", got)
	}
	long := []jobs.Segment{{Stream: jobs.Stdout, Offset: 0, Text: "xxxx"}}
	if got := claudeCut(long, 0, 4, 100); got != 4 {
		t.Errorf("cut of a long line = %d, want 4", got)
	}
	if got := claudeCut(long, 0, 4, 4); got != 0 {
		t.Errorf("cut of a line being written = %d, want 0", got)
	}
}

// TestClaudeNotes: the lines the document adds to the error buffer.
func TestClaudeNotes(t *testing.T) {
	three := 3
	for _, c := range []struct {
		j    jobs.Job
		want []string
	}{
		{jobs.Job{Status: jobs.StatusTimedOut, Timeout: 300 * time.Millisecond}, []string{"Process killed after 300ms timeout"}},
		{jobs.Job{Status: jobs.StatusFailed, Reason: "exec: no such file"}, []string{"Process error: exec: no such file"}},
		{jobs.Job{Status: jobs.StatusFailed, ExitCode: &three}, nil},
		{jobs.Job{Status: jobs.StatusKilled, Reason: "killed"}, nil},
	} {
		got := claudeNotes(c.j)
		if len(got) != len(c.want) || len(got) > 0 && got[0] != c.want[0] {
			t.Errorf("claudeNotes(%s) = %q, want %q", c.j.Status, got, c.want)
		}
	}
}
