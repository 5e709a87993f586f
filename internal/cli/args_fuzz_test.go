package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// argsCorpus seeds FuzzCLIArgs and TestC9: command lines people and agents
// type, and the odd ones.
var argsCorpus = [][]string{
	{}, {"help"}, {"--help"}, {"-h"}, {"--version"}, {"help", "start"}, {"help", "nosuch"}, {"nosuch"},
	{"start", "--", "echo", "hi"}, {"start", "--name", "web", "--timeout", "5m", "npm run dev"},
	{"start", "--env", "A=1", "--env", "=", "--", "x"}, {"start", "--timeout", "-1s", "x"}, {"start", "--max-output", "1e99", "x"},
	{"poll", "abcd", "--tail", "9"}, {"poll", "--tail", "-1", "x"}, {"poll", "x", "--tail=9223372036854775808"},
	{"log", "x", "--offset", "abc"}, {"log", "x", "--from-line", "0"}, {"log", "x", "--grep", "("}, {"log", "-f", "x", "--json"},
	{"log", "x", "--stream", "stdin"}, {"wait", "--until", "[", "x"}, {"wait", "--timeout", "0", "x"}, {"wait"},
	{"kill", "--signal", "NOPE", "x"}, {"kill", "--all", "x"}, {"kill", "--grace", "1e400h", "x"},
	{"list", "--status", "weird"}, {"list", "extra"}, {"--json", "list", "--all-scopes", "--tail", "3"},
	{"status"}, {"status", "a", "b"}, {"status", ""}, {"events", "--since", "-5"}, {"write", "x", "-"}, {"write", "x", "--eof", "data"},
	{"clear", "x"}, {"rm", "x"}, {"gc", "x"}, {"capture", "x"}, {"send-keys", "x"}, {"attach"},
	{"--db"}, {"--scope"}, {"--json=maybe", "list"}, {"---", "list"}, {"-", "-"}, {"--", "--"}, {"-x"},
	{"poll", "\x1b]0;t\x07", "--tail", "\u202e"}, {"log", "\xff\xfe", "--limit", "\x00"}, {"list", "--status=" + strings.Repeat("x", 5000)},
}

// skipVerb reports whether args would run a verb that serves or supervises
// rather than answers (supervise, tmux-pipe, mcp, ui): not what the argv
// parser's fuzzing is about, and they would block.
func skipVerb(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		switch a {
		case "supervise", "tmux-pipe", "mcp", "ui":
			return true
		}
		// list --watch redraws until interrupted (a minute between
		// frames while nothing runs): a fuzz input must end.
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return strings.HasPrefix(a, "-") && (name == "w" || name == "watch")
	})
}

// closedClient is a client that answers every call with ErrClosed, so that
// every verb runs its whole argument validation and then stops before it
// reads, writes or starts anything.
func closedClient(tb testing.TB) *jobs.Client {
	tb.Helper()
	c, err := jobs.Open(context.Background(), jobs.Options{DB: filepath.Join(tb.TempDir(), "jobs.db"), Detached: true, LazyOpen: true})
	if err != nil {
		tb.Fatal(err)
	}
	c.Close()
	return c
}

// runArgs runs the command line in-process against c and checks what
// every command line must give: no panic, exit 0, 1 or 2, and on failure
// exactly one short "jobs: " line on stderr.
func runArgs(t *testing.T, c *jobs.Client, args []string) int {
	t.Helper()
	var out, errb bytes.Buffer
	r := &runner{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, c: c}
	code := r.run(context.Background(), append([]string{"jobs"}, args...))
	if code != ExitOK && code != ExitError && code != ExitUsage {
		t.Errorf("jobs %q: exit %d, want 0, 1 or 2", args, code)
	}
	msg := errb.String()
	if code != ExitOK && msg != "" {
		if !strings.HasPrefix(msg, "jobs: ") || strings.Count(msg, "\n") != 1 || utf8.RuneCountInString(msg) > maxErrorRunes+80 {
			t.Errorf("jobs %q: stderr is not one short 'jobs: ' line: %q", args, msg)
		}
	}
	if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
		t.Errorf("jobs %q: stack trace on stderr: %q", args, msg)
	}
	return code
}

// FuzzCLIArgs feeds command lines (arguments joined by NUL) to the argv
// parser and every verb's validation.
func FuzzCLIArgs(f *testing.F) {
	for _, a := range argsCorpus {
		f.Add(strings.Join(a, "\x00"))
	}
	c := closedClient(f)
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		if joined == "" {
			args = nil
		}
		if skipVerb(args) {
			t.Skip()
		}
		runArgs(t, c, args)
	})
}

// Row C9 guards: no command line makes jobs panic or print a stack trace;
// each exits 0, 1 or 2 with at most one error line. It runs the fuzz
// corpus and a few hundred random command lines built from the verbs,
// their flags and hostile values.
func TestC9CLIArgsNeverPanic(t *testing.T) {
	c := closedClient(t)
	codes := map[int]int{}
	for _, a := range argsCorpus {
		codes[runArgs(t, c, a)]++
	}
	r := &runner{}
	var words []string
	for _, cmd := range r.app().Commands {
		if cmd.Hidden || skipVerb([]string{cmd.Name}) {
			continue
		}
		words = append(words, cmd.Name)
		for _, fl := range cmd.Flags {
			for _, n := range fl.Names() {
				words = append(words, "--"+n, "-"+n, "--"+n+"=")
			}
		}
	}
	values := []string{"", "-", "--", "0", "-1", "1", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
		"1e9", "abc", "5m", "-5s", "1e400h", "(", "[", "a{1001}", "\x00", "\x1b[2J", "\u202e", "\xff", "日本",
		strings.Repeat("x", 10000), "--json", "--db", "--scope", "=", "a=b", "TERM", "SIGKILL", "stdout"}
	rng := rand.New(rand.NewPCG(13, 9))
	const n = 400
	for i := 0; i < n; i++ {
		args := make([]string, rng.IntN(7))
		for k := range args {
			if rng.IntN(2) == 0 {
				args[k] = words[rng.IntN(len(words))]
			} else {
				args[k] = values[rng.IntN(len(values))]
			}
			if rng.IntN(5) == 0 && strings.HasSuffix(args[k], "=") {
				args[k] += values[rng.IntN(len(values))]
			}
		}
		if skipVerb(args) {
			continue
		}
		codes[runArgs(t, c, args)]++
	}
	t.Logf("MATRIX-FIGURE %s", "corpus + 400 random argv: 0 panics, 0 stack traces; exits 0/1/2 = "+
		fmtCodes(codes))
}

func fmtCodes(codes map[int]int) string {
	return fmt.Sprintf("%d/%d/%d", codes[ExitOK], codes[ExitError], codes[ExitUsage])
}
