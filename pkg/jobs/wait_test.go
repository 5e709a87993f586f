package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestWaitUntilSeesThePrompt: Until matches the unfinished last line (a
// prompt), and "$" anchors before a terminal's \r\n.
func TestWaitUntilSeesThePrompt(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `printf 'one\r\ntwo\r\n'; printf '>>> '; read x`})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ re, want string }{
		{`^two$`, "two"},
		{`>>> $`, ">>> "},
	} {
		r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: tc.re, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != jobs.WaitMatched || r.Match != tc.want {
			t.Errorf("until %q: %s %q, want matched %q", tc.re, r.Reason, r.Match, tc.want)
		}
	}
	// A timeout in the middle of the wait is a timeout, not an error.
	r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: "never", Timeout: 300 * time.Millisecond})
	if err != nil || r.Reason != jobs.WaitTimedOut {
		t.Errorf("until never: %v %v", r.Reason, err)
	}
	c.Kill(ctx, j.ID, 0)
}

// TestWaitInputAndNewOutput: Input ends a wait when the job blocks on
// stdin, and not before; NewOutput ends it when unread output exists.
func TestWaitInputAndNewOutput(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	// The job reads its stdin only once the test opens the gate; until
	// then a wait for input times out.
	gate := filepath.Join(t.TempDir(), "go")
	j, err := c.Start(ctx, jobs.Spec{Command: `while [ ! -e '` + gate + `' ]; do sleep 0.05; done; printf 'name? '; read x; echo "hi $x"; sleep 300`})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Input: true, Timeout: time.Second})
	if err != nil || r.Reason != jobs.WaitTimedOut {
		t.Fatalf("wait input before the job reads: %s %v, want a timeout", r.Reason, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Input: true, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != jobs.WaitInput || r.JobID != j.ID {
		t.Fatalf("wait input: %s %s", r.Reason, r.JobID)
	}
	p, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Newest: true})
	if err != nil || p.Output.Text != "name? " {
		t.Fatalf("the prompt: %q %v", p.Output.Text, err)
	}
	if _, err := c.Write(ctx, j.ID, []byte("bob\n")); err != nil {
		t.Fatal(err)
	}
	r, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{NewOutput: true, Timeout: 20 * time.Second})
	if err != nil || r.Reason != jobs.WaitOutput {
		t.Fatalf("wait new output: %s %v", r.Reason, err)
	}
	c.Kill(ctx, j.ID, 0)
}

// TestWaitInputStoresThePrompt: a wait that ends because the job blocked
// on its stdin answers with the prompt the job wrote just before blocking
// already stored, however late the next flush of its output would come.
// A flush every minute stands for a loaded machine, where the flush after
// the prompt came later than the 300 ms a wait used to allow it: the MCP
// execute_command then returned waiting_for_input without the prompt.
func TestWaitInputStoresThePrompt(t *testing.T) {
	c := open(t, jobs.Options{FlushInterval: time.Minute})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `printf 'name? '; printf 'warn\n' >&2; read x; echo "hi $x"`})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, j.ID, 0)
	r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Input: true, Timeout: 50 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != jobs.WaitInput || r.JobID != j.ID || !r.Jobs[0].WaitingForInput {
		t.Fatalf("wait input: %s %s %+v", r.Reason, r.JobID, r.Jobs[0])
	}
	if got, want := r.Jobs[0].OutputBytes, int64(len("name? warn\n")); got != want {
		t.Errorf("the wait's job counts %d bytes of output, want %d", got, want)
	}
	p, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Output.Text, "name? ") || !strings.Contains(p.Output.Text, "warn\n") {
		t.Fatalf("the prompt was not stored when the wait answered: %q", p.Output.Text)
	}
}

// TestMatchesWhatTheReaderSees: Until with Clean and a grep of cleaned
// output match the text a reader is shown, not the bytes under it: a
// coloured ready line matches its plain words, a bold word is found, and a
// progress line matches only as its last state.
func TestMatchesWhatTheReaderSees(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `printf '\033[32mServer\033[0m ready on :8080\n'; printf 'a \033[1mfoo\033[0m bar\n'; printf 'Downloading 10%%\rDownloading 100%%\n'; sleep 300`})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, j.ID, 0)
	r, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: "Server ready on :8080", Clean: true, Timeout: 50 * time.Second})
	if err != nil || r.Reason != jobs.WaitMatched || r.Match != "Server ready on :8080" {
		t.Fatalf("until on cleaned text: %s %q %v", r.Reason, r.Match, err)
	}
	r, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: `^Downloading 100%$`, Clean: true, Timeout: 50 * time.Second})
	if err != nil || r.Reason != jobs.WaitMatched {
		t.Fatalf("until the progress line's last state: %s %q %v", r.Reason, r.Match, err)
	}
	// The line is stored: its overwritten state is not what a reader sees.
	r, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: `^Downloading 10%$`, Clean: true, Timeout: time.Second})
	if err != nil || r.Reason != jobs.WaitTimedOut {
		t.Fatalf("until matched the overwritten state of a progress line: %s %q %v", r.Reason, r.Match, err)
	}
	// Raw (no Clean): the coloured line does not match its plain words.
	r, err = c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Until: "Server ready", Timeout: time.Second})
	if err != nil || r.Reason == jobs.WaitMatched {
		t.Errorf("until on raw bytes matched across escapes: %s %q %v", r.Reason, r.Match, err)
	}
	out, err := c.Log(ctx, j.ID, jobs.Range{Grep: "foo bar", Clean: true, Offset: 0, Limit: 1 << 20, ByteRange: true})
	if err != nil || out.Text != "a foo bar\n" {
		t.Errorf("grep of cleaned output: %q %v", out.Text, err)
	}
	raw, err := c.Log(ctx, j.ID, jobs.Range{Grep: "foo bar", Offset: 0, Limit: 1 << 20, ByteRange: true})
	if err != nil || raw.Text != "" {
		t.Errorf("grep of raw output matched across escapes: %q %v", raw.Text, err)
	}
	p, err := c.Poll(ctx, j.ID, jobs.PollOptions{Grep: "^Downloading 10%$"})
	if err != nil || p.Output.Text != "" {
		t.Errorf("poll grep matched a progress line's overwritten state: %q %v", p.Output.Text, err)
	}
}

// TestReadNewNewest: with Newest, a read of more than the budget gives
// the newest part from a line start and counts what it skipped; the cursor
// moves to the end.
func TestReadNewNewest(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo "compiling unit $i"; done; echo READY`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Tail: 100, Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	o := p.Output
	if !strings.HasPrefix(o.Text, "compiling unit ") || !strings.HasSuffix(o.Text, "unit 2000\nREADY\n") || len(o.Text) > 100 {
		t.Errorf("newest: %q", o.Text)
	}
	if o.SkippedFrom != 0 || o.Skipped+int64(len(o.Text)) != o.TotalBytes || o.Start != o.Skipped {
		t.Errorf("skipped %d from %d, start %d, %d of %d bytes shown", o.Skipped, o.SkippedFrom, o.Start, len(o.Text), o.TotalBytes)
	}
	if p, _ := c.ReadNew(ctx, j.ID, jobs.PollOptions{Tail: 100, Newest: true}); p.Output.Text != "" {
		t.Errorf("second read: %q", p.Output.Text)
	}
}

// TestCommandLineRunsUnderBash: one command line runs under bash when it
// is installed, or the shell asked for; the argv records it.
func TestCommandLineRunsUnderBash(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: `set -o pipefail; [[ a == a ]] && echo {1..3}`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(j.Argv[0], "/bash") || j.Argv[1] != "-c" {
		t.Errorf("argv = %q", j.Argv)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if o, _ := c.Log(ctx, j.ID, jobs.Range{}); o.Text != "1 2 3\n" {
		t.Errorf("bash syntax gave %q", o.Text)
	}
	j, err = c.Start(ctx, jobs.Spec{Command: "echo $0", Shell: "sh"})
	if err != nil || !strings.HasSuffix(j.Argv[0], "/sh") {
		t.Fatalf("shell sh: %v %q", err, j.Argv)
	}
	if _, err := c.Start(ctx, jobs.Spec{Command: "true", Shell: "no-such-shell"}); err == nil || !strings.Contains(err.Error(), "no-such-shell") {
		t.Errorf("a missing shell: %v", err)
	}
}
