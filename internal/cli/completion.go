package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// completeVerb is the hidden verb the completion scripts call with the
// words typed so far. It is answered before the command line is parsed
// (Run), so that the words reach it as the shell split them.
const completeVerb = "__complete"

// completionShells are the shells `jobs completion` writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

func (r *runner) completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "SHELL",
		Description: "The script completes verbs, flags, signal and status names, scopes, and the ids and\n" +
			"names of the scope's jobs, asked from the database as you type (read-only: it starts\n" +
			"no supervisor and creates no database). Install (see docs/completion.md; 'env jobs'\n" +
			"reaches the program past the shell's builtin jobs):\n" +
			"  bash: " + installLines["bash"] + "\n" +
			"  zsh:  " + installLines["zsh"] + "\n" +
			"  fish: " + installLines["fish"],
		Action: func(cc *ucli.Context) error {
			a := args(cc)
			if len(a) != 1 {
				return usagef("completion", "completion takes one shell: bash, zsh or fish")
			}
			script, ok := completionScripts[a[0]]
			if !ok {
				return usagef("completion", "unknown shell %q: want bash, zsh or fish", a[0])
			}
			_, err := io.WriteString(r.stdout, script)
			return err
		},
	}
}

// installLines install each shell's script on a fresh account: they
// create the directories and the start-up line they need.
//
// bash: bash-completion loads a file of its completions directory only for
// a command that has no completion yet, and it gives the builtin jobs one
// (job specs), so a file there is never loaded; ~/.bashrc sources it after
// bash-completion has run, which replaces that rule for the word jobs.
// zsh: the file is named _jobs_cli, since zsh's own _jobs is the helper
// that completes job specs for kill, fg and bg; the directory goes first
// in fpath so that its #compdef jobs wins over zsh's for the builtin.
// fish: a function named jobs runs the program, as functions come before
// builtins in fish; the completion file replaces fish's for the builtin.
var installLines = map[string]string{
	"bash": `mkdir -p ~/.local/share/bash-completion/completions && env jobs completion bash > ~/.local/share/bash-completion/completions/jobs && echo '. ~/.local/share/bash-completion/completions/jobs' >> ~/.bashrc`,
	"zsh":  `mkdir -p ~/.local/share/zsh/site-functions && env jobs completion zsh > ~/.local/share/zsh/site-functions/_jobs_cli && echo 'fpath=(~/.local/share/zsh/site-functions $fpath); autoload -Uz compinit && compinit' >> ~/.zshrc`,
	"fish": `mkdir -p ~/.config/fish/completions ~/.config/fish/functions && env jobs completion fish > ~/.config/fish/completions/jobs.fish && printf 'function jobs --description "jobs: durable background jobs"\n    command jobs $argv\nend\n' > ~/.config/fish/functions/jobs.fish`,
}

// The scripts hand the words to `jobs __complete SHELL WORD…`, which
// answers with a first line "words" followed by one candidate a line, or
// "files" when a path or a command is expected. The candidates are already
// filtered by the word being completed.
var completionScripts = map[string]string{
	"bash": `# bash completion for jobs
_jobs() {
	local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]} out
	# "jobs" is also a bash builtin: run the program on PATH.
	[[ $prog == */* ]] || prog=$(type -P "$prog") || return 0
	out=$("$prog" __complete bash "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
	COMPREPLY=()
	case ${out%%$'\n'*} in
	files)
		[[ $cur == = ]] && cur=
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		;;
	words)
		[[ $out == *$'\n'* ]] || return 0
		mapfile -t COMPREPLY <<<"${out#*$'\n'}"
		# Bash splits "--flag=value" at "=": a value completed right after
		# the "=" replaces that word, so it keeps it.
		[[ $cur == = ]] && COMPREPLY=("${COMPREPLY[@]/#/=}")
		;;
	esac
	return 0
}
complete -F _jobs jobs
`,
	"zsh": `#compdef jobs
# zsh completion for jobs. Its name is _jobs_cli: zsh's own _jobs completes
# job specs (kill %<TAB>) and must stay.
_jobs_cli() {
	local prog=${words[1]} out
	# "jobs" is also a zsh builtin: run the program on PATH.
	[[ $prog == */* ]] || prog=${commands[$prog]}
	[[ -n $prog ]] || return 1
	out=$("$prog" __complete zsh "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
	if [[ ${out%%$'\n'*} == files ]]; then
		_files
		return
	fi
	[[ $out == *$'\n'* ]] || return 1
	local -a cands
	cands=("${(@f)${out#*$'\n'}}")
	compadd -a cands
}
if [[ ${funcstack[1]} == _jobs_cli ]]; then
	_jobs_cli "$@"
else
	compdef _jobs_cli jobs
fi
`,
	"fish": `# fish completion for jobs
function __jobs_complete
	set -l words (commandline -opc) (commandline -ct)
	# "jobs" is also a fish builtin: run the program.
	set -l out (command $words[1] __complete fish $words[2..-1] 2>/dev/null)
	or return
	if test "$out[1]" = files
		__fish_complete_path (commandline -ct)
		return
	end
	printf '%s\n' $out[2..-1]
end
complete -c jobs -f -a '(__jobs_complete)'
`,
}

// complete answers `jobs __complete SHELL WORD…`: the words after "jobs" up
// to the cursor, the last one being the word completed (maybe empty). It
// always exits 0: a completion that fails offers nothing.
func (r *runner) complete(ctx context.Context, app *ucli.App, words []string) int {
	if len(words) == 0 || !slices.Contains(completionShells, words[0]) {
		fmt.Fprintln(r.stderr, "jobs: __complete takes a shell (bash, zsh or fish) and the words typed")
		return ExitUsage
	}
	shell := words[0]
	words = words[1:]
	if len(words) == 0 {
		words = []string{""}
	}
	if shell == "bash" {
		// Bash passes the words as typed, quotes and all.
		words = joinEquals(words)
		for i, w := range words {
			words[i] = shellUnquote(w)
		}
	}
	cp := completion{app: app, shell: shell}
	files, cands := cp.candidates(ctx, words)
	if files {
		fmt.Fprintln(r.stdout, "files")
		return ExitOK
	}
	var b strings.Builder
	b.WriteString("words\n")
	seen := map[string]bool{}
	for _, c := range cands {
		// A name holding control characters is not offered: listing it
		// would send them to the terminal.
		if c == "" || seen[c] || hasControl(c) {
			continue
		}
		seen[c] = true
		if shell == "bash" {
			c = bashQuote(c)
		}
		b.WriteString(c)
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(r.stdout, b.String())
	return ExitOK
}

// joinEquals undoes bash's split of "--flag=value" into "--flag", "=",
// "value" (COMP_WORDBREAKS holds "=").
func joinEquals(words []string) []string {
	out := make([]string, 0, len(words))
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "=" && len(out) > 0 && isFlag(out[len(out)-1]) && !strings.Contains(out[len(out)-1], "=") {
			out[len(out)-1] += "="
			if i+1 < len(words) {
				i++
				out[len(out)-1] += words[i]
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

// completion is one request: what the words typed so far leave to offer.
type completion struct {
	app   *ucli.App
	shell string
	db    string // --db given on the line
	scope string // --scope given on the line
}

// candidates returns the words that may come at the cursor (the last of
// words), or files=true when a path or a command comes there.
func (cp *completion) candidates(ctx context.Context, words []string) (files bool, out []string) {
	cur := words[len(words)-1]
	var verb *ucli.Command
	helpVerb, dashed := false, false
	expect := "" // a flag whose value comes next
	positional := 0
	for _, w := range words[:len(words)-1] {
		switch {
		case expect != "":
			cp.record(expect, w)
			expect = ""
		case dashed:
			positional++
		case w == "--":
			dashed = true
		case isFlag(w):
			name, hasValue := flagName(w)
			if hasValue {
				_, v, _ := strings.Cut(w, "=")
				cp.record(name, v)
			} else if cp.takesValue(verb, name) {
				expect = name
			}
		case verb == nil && !helpVerb:
			if w == "help" {
				helpVerb = true
				continue
			}
			verb = findCommand(cp.app.Commands, w)
			if verb == nil {
				return false, nil // not a verb jobs knows: nothing to offer
			}
		default:
			positional++
		}
	}
	switch {
	case expect != "":
		return cp.values(ctx, expect, cur)
	case dashed:
		return true, nil
	case isFlag(cur) && strings.Contains(cur, "="):
		name, _ := flagName(cur)
		flag, value, _ := strings.Cut(cur, "=")
		files, vals := cp.values(ctx, name, value)
		if cp.shell != "bash" {
			for i := range vals {
				vals[i] = flag + "=" + vals[i]
			}
		}
		return files, vals
	case strings.HasPrefix(cur, "-"):
		return false, withPrefix(cp.flags(verb), cur)
	case helpVerb:
		if positional > 0 {
			return false, nil
		}
		return false, withPrefix(cp.verbs(), cur)
	case verb == nil:
		return false, withPrefix(append(cp.verbs(), "help"), cur)
	}
	return cp.positional(ctx, verb, positional, cur)
}

// record keeps the values of --db and --scope, which choose the database
// and the scope whose jobs are offered.
func (cp *completion) record(flag, value string) {
	switch flag {
	case "db":
		cp.db = value
	case "scope":
		cp.scope = value
	}
}

func (cp *completion) takesValue(verb *ucli.Command, name string) bool {
	if v, ok := globalFlags[name]; ok {
		return v
	}
	if verb == nil {
		return false
	}
	return flagTakesValue(verb, name)
}

// verbs are the visible verbs.
func (cp *completion) verbs() []string {
	var out []string
	for _, c := range cp.app.Commands {
		if !c.Hidden {
			out = append(out, c.Name)
		}
	}
	return out
}

// flags are the verb's flags and the global ones (which go anywhere), or
// the app's own before a verb.
func (cp *completion) flags(verb *ucli.Command) []string {
	var fs []ucli.Flag
	if verb != nil {
		fs = append(fs, verb.Flags...)
	}
	fs = append(fs, cp.app.Flags...)
	var out []string
	for _, f := range fs {
		for _, n := range f.Names() {
			if len(n) == 1 {
				out = append(out, "-"+n)
			} else {
				out = append(out, "--"+n)
			}
		}
	}
	out = append(out, "--help")
	if verb == nil {
		out = append(out, "--version")
	}
	return out
}

// values completes the value of flag.
func (cp *completion) values(ctx context.Context, flag, cur string) (files bool, out []string) {
	switch flag {
	case "signal", "s":
		return false, withPrefixFold(vocab.SignalNames(), cur)
	case "status":
		// Comma-separated lists: complete the last item.
		head := ""
		if i := strings.LastIndexByte(cur, ','); i >= 0 {
			head, cur = cur[:i+1], cur[i+1:]
		}
		var names []string
		for _, s := range allStatuses {
			names = append(names, string(s))
		}
		names = append(names, "active", "finished")
		for _, n := range withPrefix(names, cur) {
			out = append(out, head+n)
		}
		return false, out
	case "stream":
		return false, withPrefix([]string{"stdout", "stderr"}, cur)
	case "scope":
		return false, withPrefix(cp.scopes(ctx), cur)
	case "job":
		return false, withPrefix(cp.refs(ctx), cur)
	case "db", "cwd":
		return true, nil
	}
	return false, nil
}

// positional completes the n-th argument (from 0) of verb. A verb whose
// usage names an ID there takes a job: its id or name.
func (cp *completion) positional(ctx context.Context, verb *ucli.Command, n int, cur string) (files bool, out []string) {
	switch verb.Name {
	case "completion":
		if n == 0 {
			return false, withPrefix(completionShells, cur)
		}
		return false, nil
	case "start":
		return true, nil
	}
	if argAt(verb.ArgsUsage, n) == "ID" {
		return false, withPrefix(cp.refs(ctx), cur)
	}
	return false, nil
}

// argAt returns the n-th word of a usage line such as "ID KEYS…" or
// "ID…", where a trailing "…" repeats the last word.
func argAt(usage string, n int) string {
	ws := strings.Fields(usage)
	if len(ws) == 0 {
		return ""
	}
	if n >= len(ws) {
		last := ws[len(ws)-1]
		if !strings.HasSuffix(last, "…") {
			return ""
		}
		n = len(ws) - 1
	}
	return strings.TrimSuffix(ws[n], "…")
}

// openDB opens the database read-only, or returns nil when there is none:
// completion never creates one.
func (cp *completion) openDB() *db.DB {
	path := cp.db
	if path == "" {
		p, err := jobs.DefaultDBPath()
		if err != nil {
			return nil
		}
		path = p
	}
	// A shell waits for the answer: a database that is not there, or not
	// readable at once, completes nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := db.OpenReadOnly(ctx, path)
	if err != nil {
		return nil
	}
	return d
}

// completionLimit caps how many jobs or scopes a completion offers.
const completionLimit = 200

// refs are the names and ids of the scope's newest jobs, names first.
func (cp *completion) refs(ctx context.Context) []string {
	d := cp.openDB()
	if d == nil {
		return nil
	}
	defer d.Close()
	scope := cp.scope
	if scope == "" {
		scope = os.Getenv("JOBS_SCOPE")
	}
	if scope == "" {
		// The config file's scope, as the verbs use it; a broken file
		// offers the default scope's jobs (a completion never errs).
		if cfg, err := loadConfig(); err == nil && cfg.values["scope"].Source != fromDefault {
			scope = cfg.values["scope"].raw
		}
	}
	if scope == "" {
		scope = jobs.DefaultScope
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	refs, err := d.Refs(ctx, scope, completionLimit)
	if err != nil {
		return nil
	}
	var names, ids []string
	for _, r := range refs {
		if r.Name != "" {
			names = append(names, r.Name)
		}
		ids = append(ids, r.ID)
	}
	return append(names, ids...)
}

// scopes are the scopes that have jobs.
func (cp *completion) scopes(ctx context.Context) []string {
	d := cp.openDB()
	if d == nil {
		return nil
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, _ := d.Scopes(ctx, completionLimit)
	return out
}

func withPrefix(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}

// withPrefixFold keeps the words starting with prefix in any case, as
// signal names are read ("term", "SIGTERM").
func withPrefixFold(words []string, prefix string) []string {
	p := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(prefix), "SIG"))
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, p) {
			out = append(out, w)
		}
	}
	return out
}

// hasControl reports whether s holds a control character or a
// bidirectional override.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || textclean.Invisible(r) {
			return true
		}
	}
	return false
}

// shellUnquote reads a word as the shell would, even one whose quote is not
// closed yet (a word being typed): 'a b', "a b" and a\ b are all "a b".
func shellUnquote(w string) string {
	if !strings.ContainsAny(w, `'"\\`) {
		return w
	}
	var b strings.Builder
	quote := byte(0)
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(w) && (quote == 0 || strings.IndexByte("\"\\$`", w[i+1]) >= 0):
			i++
			b.WriteByte(w[i])
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote = c
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// bashQuote quotes a candidate that holds a character the shell would
// read, so that bash inserts it as one word.
func bashQuote(c string) string {
	if !strings.ContainsAny(c, " \t'\"\\$`|&;<>()*?[]{}!#~") {
		return c
	}
	return "'" + strings.ReplaceAll(c, "'", `'\''`) + "'"
}
