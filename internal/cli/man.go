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
	for _, e := range [][2]string{
		{"JOBS_DB", "the database path (\\fB\\-\\-db\\fR)"},
		{"JOBS_SCOPE", "the scope (\\fB\\-\\-scope\\fR)"},
		{"XDG_STATE_HOME", "where the default database lives: $XDG_STATE_HOME/jobs/jobs.db, else ~/.local/state/jobs/jobs.db"},
		{"XDG_RUNTIME_DIR", "where the supervisor's socket and lock live"},
	} {
		w(".TP\n.B %s\n%s\n", e[0], e[1])
	}
	w(".SH EXIT STATUS\n0 ok; 1 error; 2 usage; \\fBwait\\fR and \\fBstart \\-\\-wait\\fR exit with the job's status (128+n for signal n); 124 when \\fBwait \\-\\-timeout\\fR passes with the job still running.\n")
	w(".SH FILES\n.TP\n.I ~/.local/state/jobs/jobs.db\nthe database: every job's metadata, status history and output (SQLite; read it with \\fBsqlite3\\fR)\n")
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
