package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// complete runs the bash completion function that `jobs completion bash`
// prints, in a real bash, on the words of a partial command line (the last
// one is the word at the cursor), and returns the candidates.
func (w *world) complete(words ...string) []string {
	w.t.Helper()
	script := filepath.Join(w.base, "jobs.bash")
	if _, err := os.Stat(script); err != nil {
		if err := os.WriteFile(script, []byte(w.ok("completion", "bash")), 0o600); err != nil {
			w.t.Fatal(err)
		}
	}
	quoted := make([]string, len(words))
	for i, wd := range words {
		quoted[i] = "'" + strings.ReplaceAll(wd, "'", `'\''`) + "'"
	}
	prog := `source "$1"
COMP_WORDS=(jobs ` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_jobs
printf '%s\n' "${COMPREPLY[@]}"`
	c := exec.Command("bash", "--norc", "--noprofile", "-c", prog, "bash", script)
	// The program comes first on PATH, as an installed jobs would.
	env := w.environ()
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + filepath.Dir(jobsBin) + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	c.Env = env
	out, err := c.Output()
	if err != nil {
		w.t.Fatalf("complete %q: %v", words, err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}

// TestCompletionBash runs the generated bash completion on partial command
// lines: verbs, flags, signal and status names, scopes, and the names and
// ids of the scope's jobs from a real database.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	w := newWorld(t)
	id := w.start("--name", "build-docs", "--", "true")
	other := w.start("--name", "nightly", "--", "true")
	hostile := w.start("--name", "nice\x1b]0;pwned\x07", "--", "true")
	mine := w.start("--name", "my job", "--", "true")
	w.scope = "elsewhere"
	foreign := w.start("--name", "foreign-job", "--", "true")
	w.scope = ""
	// Ids are random: a name's prefix is sometimes an id's too, and then
	// the id is rightly offered beside the name.
	ids := []string{id, other, hostile, mine}
	with := func(prefix string, ids []string, names ...string) []string {
		for _, x := range ids {
			if strings.HasPrefix(x, prefix) {
				names = append(names, x)
			}
		}
		return names
	}

	cases := []struct {
		words []string
		want  []string // all of these, in any order
		not   []string // none of these
		exact bool     // want is the whole answer
	}{
		{words: []string{""}, want: []string{"start", "poll", "log", "kill", "list", "wait", "ui", "completion", "help"}, not: []string{"tmux-pipe", "__complete"}},
		{words: []string{"po"}, want: []string{"poll"}, exact: true},
		{words: []string{"kill", "--gr"}, want: []string{"--grace"}, exact: true},
		{words: []string{"kill", "--signal", "TE"}, want: []string{"TERM"}, exact: true},
		{words: []string{"kill", "-s", ""}, want: []string{"TERM", "INT", "KILL", "HUP", "STOP", "CONT", "USR1"}},
		{words: []string{"list", "--status", "=", "ru"}, want: []string{"running"}, exact: true},
		{words: []string{"list", "--status", "done,t"}, want: []string{"done,timed_out"}, exact: true},
		{words: []string{"poll", "bu"}, want: with("bu", ids, "build-docs"), exact: true},
		{words: []string{"poll", ""}, want: []string{"build-docs", "nightly", id, hostile}, not: []string{"foreign-job", foreign, "nice\x1b]0;pwned\x07"}},
		{words: []string{"poll", "ni"}, want: with("ni", ids, "nightly"), exact: true},
		{words: []string{"poll", "my"}, want: with("my", ids, "'my job'"), exact: true},
		{words: []string{"poll", "'my j"}, want: []string{"'my job'"}, exact: true},
		{words: []string{"poll", `my\ `}, want: []string{"'my job'"}, exact: true},
		{words: []string{"log", "--tail", "5", id[:4]}, want: []string{id}, exact: true},
		{words: []string{"wait", "build-docs", "ni"}, want: with("ni", ids, "nightly"), exact: true},
		{words: []string{"--scope", "elsewhere", "kill", "fo"}, want: with("fo", []string{foreign}, "foreign-job"), exact: true},
		{words: []string{"--scope", "else"}, want: []string{"elsewhere"}, exact: true},
		{words: []string{"completion", ""}, want: []string{"bash", "zsh", "fish"}, exact: true},
		{words: []string{"help", "sta"}, want: []string{"start", "status"}, exact: true},
		{words: []string{"log", "--stream", "std"}, want: []string{"stdout", "stderr"}, exact: true},
	}
	for _, c := range cases {
		got := w.complete(c.words...)
		for _, s := range c.want {
			if !slices.Contains(got, s) {
				t.Errorf("jobs %s<TAB>: %q lacks %q", strings.Join(c.words, " "), got, s)
			}
		}
		for _, s := range c.not {
			if slices.Contains(got, s) {
				t.Errorf("jobs %s<TAB>: %q offers %q", strings.Join(c.words, " "), got, s)
			}
		}
		if c.exact && len(got) != len(c.want) {
			t.Errorf("jobs %s<TAB>: got %q, want exactly %q", strings.Join(c.words, " "), got, c.want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		if out := w.ok("completion", shell); !strings.Contains(out, "__complete "+shell) {
			t.Errorf("jobs completion %s does not call __complete:\n%s", shell, out)
		}
	}
	t.Logf("%d partial command lines completed in bash", len(cases))
}

// TestCompletionCreatesNothing: completing a job id where no database
// exists answers nothing and leaves no database, directory or supervisor
// behind.
func TestCompletionCreatesNothing(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	w := newWorld(t)
	if got := w.complete("poll", ""); len(got) != 0 {
		t.Fatalf("completion offered %q without a database", got)
	}
	if got := w.complete("--scope", ""); len(got) != 0 {
		t.Fatalf("completion offered scopes %q without a database", got)
	}
	for _, dir := range []string{w.state, w.run} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Fatalf("completion left %s in %s", ents[0].Name(), dir)
		}
	}
}
