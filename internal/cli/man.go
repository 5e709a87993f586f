package cli

import (
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

//go:generate sh -c "go run ./mangen > ../../docs/jobs.1"

// ManPage renders jobs(1), one page with every verb, in roff from the same
// command and flag definitions as --help. It walks the commands itself
// because the release build leaves out urfave/cli's generator
// (urfave_cli_no_docs). docs/jobs.1 is its output; a test keeps it current.
func ManPage() string {
	r := &runner{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	app := r.app()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(".TH JOBS 1 \"\" \"jobs\" \"User Commands\"\n")
	w(".SH NAME\njobs \\- %s\n", roffText(app.Usage))
	w(".SH SYNOPSIS\n.B jobs\n[\\fB\\-\\-db\\fR \\fIPATH\\fR] [\\fB\\-\\-scope\\fR \\fINAME\\fR] [\\fB\\-\\-json\\fR] \\fIVERB\\fR [\\fIflags\\fR] [\\fIargs\\fR]\n")
	w(".SH DESCRIPTION\n%s\n", roffParagraphs(app.Description))
	w(".PP\nFlags may follow the arguments: \\fBjobs poll ID \\-\\-tail 9\\fR works.\n")
	w(".SH GLOBAL OPTIONS\nThese go before or after the verb.\n")
	for _, f := range app.Flags {
		w("%s", roffFlag(f))
	}
	w(".TP\n\\fB\\-\\-help\\fR, \\fB\\-h\\fR\nshow help (also \\fBjobs help\\fR \\fIVERB\\fR)\n")
	w(".TP\n\\fB\\-\\-version\\fR\nprint the version and exit\n")
	w(".SH COMMANDS\n")
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		usage := "[flags]"
		if c.ArgsUsage != "" {
			usage += " " + c.ArgsUsage
		}
		w(".SS \"jobs %s %s\"\n", c.Name, roffQuoted(usage))
		w("%s\n", roffText(sentence(c.Usage)))
		if c.Description != "" {
			w(".PP\n%s\n", roffParagraphs(c.Description))
		}
		for _, f := range c.Flags {
			w("%s", roffFlag(f))
		}
	}
	w(".SH ENVIRONMENT\n")
	for _, e := range manEnvironment {
		w(".TP\n.B %s\n%s\n", e[0], roffText(e[1]))
	}
	w(".SH EXIT STATUS\n")
	for _, e := range manExitStatus {
		w(".TP\n.B %s\n%s\n", e[0], roffText(e[1]))
	}
	w(".SH EXAMPLES\n")
	for _, e := range manExamples {
		w(".PP\n%s\n.PP\n.RS\n.nf\n%s\n.fi\n.RE\n", roffText(e[0]), roffEscape(e[1]))
	}
	w(".SH FILES\n.TP\n.I ~/.local/state/jobs/jobs.db\nthe database: every job's metadata, status history and output (SQLite; read it with \\fBsqlite3\\fR)\n")
	w(".TP\n.I ~/.config/jobs/config.toml\nthe defaults of \\fBjobs start\\fR and the scope: timeout, ttl, max_output, shell, scope (\\fBjobs config\\fR shows them)\n")
	w(".SH SEE ALSO\n\\fBsqlite3\\fR(1), \\fBtmux\\fR(1)\n")
	return b.String()
}

// roffFlag renders one flag as a tagged paragraph: its names, its value's
// placeholder and its usage.
func roffFlag(f ucli.Flag) string {
	if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
		return ""
	}
	usage, takes := "", false
	if d, ok := f.(ucli.DocGenerationFlag); ok {
		usage, takes = d.GetUsage(), d.TakesValue()
	}
	placeholder, usage := splitPlaceholder(usage)
	if takes && placeholder == "" {
		placeholder = "VALUE"
	}
	var names []string
	for _, n := range f.Names() {
		dash := "\\-\\-"
		if len(n) == 1 {
			dash = "\\-"
		}
		names = append(names, "\\fB"+dash+roffEscape(n)+"\\fR")
	}
	head := strings.Join(names, ", ")
	if takes {
		head += " \\fI" + roffEscape(placeholder) + "\\fR"
	}
	return ".TP\n" + head + "\n" + roffText(usage) + "\n"
}

// splitPlaceholder takes the back-quoted placeholder out of a usage line,
// as urfave/cli's help does: "database `PATH`" is PATH and "database PATH".
func splitPlaceholder(usage string) (string, string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+1+j+1:]
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// roffParagraphs reflows a description written for an 80-column
// terminal: wrapped lines join into one paragraph, while indented lines
// (examples, lists) stay lines of their own.
func roffParagraphs(s string) string {
	var out []string
	para := ""
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t"):
			if para != "" {
				out = append(out, roffText(para))
				para = ""
			}
			out = append(out, ".br", "\\ \\ "+roffEscape(strings.TrimSpace(l)))
		case para == "":
			para = l
		default:
			para += " " + l
		}
	}
	if para != "" {
		out = append(out, roffText(para))
	}
	return strings.Join(out, "\n")
}

// roffText escapes a line of text: backslashes, and a leading dot or quote
// that roff would read as a request.
func roffText(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = "\\&" + s
	}
	return s
}

func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

func roffQuoted(s string) string {
	return strings.ReplaceAll(roffEscape(s), `"`, `""`)
}

// manEnvironment is every variable jobs reads, as the man page lists it.
var manEnvironment = [][2]string{
	{"JOBS_DB", "the database path (--db)"},
	{"JOBS_SCOPE", "the scope (--scope)"},
	{"JOBS_TIMEOUT", "the default of start --timeout (beats the config file)"},
	{"JOBS_TTL", "the default of start --ttl (beats the config file)"},
	{"JOBS_MAX_OUTPUT", "the default of start --max-output (beats the config file)"},
	{"JOBS_SHELL", "the default of start --shell (beats the config file)"},
	{"JOBS_MCP_PROFILE", "the profile jobs mcp serves (--profile)"},
	{"JOBS_EXECUTABLE", "the jobs binary a program embedding the Go package starts supervisors with"},
	{"PI_BASH_YIELD_MS", "the default of start --yield, in milliseconds"},
	{"PI_BASH_JOB_TTL_MS", "the default ttl, in milliseconds (JOBS_TTL beats it)"},
	{"PI_BASH_MAX_OUTPUT_CHARS", "the characters poll and start --yield show (default 500)"},
	{"OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "the same, when PI_BASH_MAX_OUTPUT_CHARS is not set"},
	{"NO_COLOR", "when set, no colour in list, poll and status (also TERM=dumb)"},
	{"JOBS_TMUX_SOCKET", "the tmux server of tmux jobs: a name as for tmux -L, or a socket path as for tmux -S"},
	{"JOBS_MCP_CALL_BOUND_MS", "how long one MCP call may block (default 50000, at most 120000)"},
	{"JOBS_DURAGENT_DIR", "where the duragent profile mirrors each process's log and metadata (default .duragent in the server's directory)"},
	{"JOBS_MAX_RUNNING_PER_SCOPE", "in the supervisor's environment: running jobs per scope before more queue (default 50)"},
	{"JOBS_MAX_RUNNING", "in the supervisor's environment: running jobs in all before more queue (default 200)"},
	{"JOBS_DRAIN_TIMEOUT", "in the supervisor's environment: how long a job whose main process exited waits for a grandchild holding its output before it is finished (default 2s)"},
	{"XDG_CONFIG_HOME", "where the config file lives: $XDG_CONFIG_HOME/jobs/config.toml, else ~/.config/jobs/config.toml"},
	{"XDG_STATE_HOME", "where the default database lives: $XDG_STATE_HOME/jobs/jobs.db, else ~/.local/state/jobs/jobs.db"},
	{"XDG_RUNTIME_DIR", "where the supervisor's socket and lock live"},
}

// manExitStatus is the exit statuses of jobs (see exitcodes.go).
var manExitStatus = [][2]string{
	{"0", "the verb did what was asked"},
	{"1", "an error: unknown job, unreachable supervisor, a bad config file, a database problem"},
	{"2", "a usage error: unknown verb or flag, missing argument, malformed value"},
	{"124", "wait --timeout passed with a job still running"},
	{"125", "wait --until, --idle or --input: the jobs ended without the condition happening"},
	{"127", "start --wait: the job could not start (its program was not found, say)"},
	{"128+n", "wait, start --wait and log -f: the job died of signal n"},
	{"130", "jobs was interrupted while waiting or following; the job keeps running"},
	{"141", "a follow (log -f, events -f) ended because the reader of its output went away; the job keeps running"},
	{"other", "wait, start --wait and log -f exit with the job's own exit status"},
}

// manExamples are the first commands a person runs.
var manExamples = [][2]string{
	{"Start a dev server, wait until it is ready, and read its output:", "jobs start --name web --timeout 0 'npm run dev'\njobs wait web --until 'Local:' --timeout 60s\njobs log web --tail 20"},
	{"Run a build and exit with its status, its output streaming here:", "jobs start --wait 'make -j4'"},
	{"Find every error in a long log, with line numbers:", "jobs log build --grep 'ERROR|FATAL'"},
	{"Answer a prompt, then follow the output to the end:", "printf 'y\\n' | jobs write installer -\njobs log installer -f"},
	{"See what ran today, and what failed:", "jobs list --status failed\njobs events --job ID"},
	{"Stop a job, its children too:", "jobs kill web"},
	{"Keep jobs for a week by default:", "mkdir -p ~/.config/jobs\necho 'ttl = \"168h\"' >> ~/.config/jobs/config.toml\njobs config"},
}
