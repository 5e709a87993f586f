package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedMan is the man page in the repository.
var shippedMan = filepath.Join("..", "..", "docs", "jobs.1")

// TestManPageCurrent: docs/jobs.1 is what the generator makes from today's
// command definitions. With -update it is rewritten.
func TestManPageCurrent(t *testing.T) {
	got := ManPage()
	if *update {
		if err := os.WriteFile(shippedMan, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(shippedMan)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("docs/jobs.1 is out of date: run 'go generate ./internal/cli' (or go test ./internal/cli -run TestManPageCurrent -update)")
	}
}

// TestManPageEveryVerbAndFlag: the shipped page documents every visible verb
// and, in that verb's section, every one of its flags and the global ones.
func TestManPageEveryVerbAndFlag(t *testing.T) {
	page, err := os.ReadFile(shippedMan)
	if err != nil {
		t.Fatal(err)
	}
	if missing := manMissing(string(page)); len(missing) > 0 {
		t.Fatalf("docs/jobs.1 lacks: %s", strings.Join(missing, ", "))
	}
}

// TestManPageCheckBites: the check above notices a verb or a flag taken
// out of the page.
func TestManPageCheckBites(t *testing.T) {
	page := ManPage()
	noFlag := strings.Replace(page, `\fB\-\-grace\fR`, `\fB\-\-graze\fR`, 1)
	if got := manMissing(noFlag); len(got) == 0 || !strings.Contains(strings.Join(got, " "), "--grace") {
		t.Fatalf("a page without kill --grace passed the check: %v", got)
	}
	noVerb := strings.Replace(page, `.SS "jobs wait `, `.SS "jobs wayt `, 1)
	if got := manMissing(noVerb); len(got) == 0 || !strings.Contains(strings.Join(got, " "), "wait") {
		t.Fatalf("a page without wait passed the check: %v", got)
	}
}

// manMissing lists the verbs and flags the page does not document.
func manMissing(page string) []string {
	r := &runner{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	app := r.app()
	sections := map[string]string{}
	parts := strings.Split(page, "\n.SS \"jobs ")
	head := parts[0]
	for _, p := range parts[1:] {
		verb, _, _ := strings.Cut(p, " ")
		sections[verb] = p
	}
	var missing []string
	flagIn := func(text, name string) bool {
		dash := `\-\-`
		if len(name) == 1 {
			dash = `\-`
		}
		return strings.Contains(text, `\fB`+dash+strings.ReplaceAll(name, "-", `\-`)+`\fR`)
	}
	for _, f := range app.Flags {
		for _, n := range f.Names() {
			if !flagIn(head, n) {
				missing = append(missing, "global --"+n)
			}
		}
	}
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		sec, ok := sections[c.Name]
		if !ok {
			missing = append(missing, "verb "+c.Name)
			continue
		}
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				if !flagIn(sec, n) {
					missing = append(missing, c.Name+" --"+n)
				}
			}
		}
	}
	return missing
}

// TestManPageExamplesExitEnvironment: the page has examples, every exit
// status of exitcodes.go, and the variables a person sets.
func TestManPageExamplesExitEnvironment(t *testing.T) {
	page := ManPage()
	for _, want := range []string{".SH EXAMPLES", ".SH EXIT STATUS", ".B 124", ".B 125", ".B 130", ".B 128+n",
		"JOBS_TIMEOUT", "JOBS_TTL", "JOBS_MAX_OUTPUT", "JOBS_SHELL", "JOBS_MCP_PROFILE", "XDG_CONFIG_HOME",
		"PI_BASH_YIELD_MS", "PI_BASH_JOB_TTL_MS", "PI_BASH_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "NO_COLOR"} {
		if !strings.Contains(page, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
