package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// globalFlags are the flags every verb accepts, with whether they take a
// value. They are defined once, on the app.
var globalFlags = map[string]bool{"db": true, "scope": true, "json": false, "read-only": false}

// commandLine is a command line put in the order urfave/cli can parse:
// global flags, verb, the verb's flags, "--", positional arguments.
type commandLine struct {
	args []string
	// dashed reports that the user wrote "--"; dashArgs are the arguments
	// that followed it (start runs them as an argv).
	dashed   bool
	dashArgs []string
}

// reorder moves flags in front of positional arguments so that
// `jobs poll ID --tail 9 --json` parses like `jobs --json poll --tail 9 ID`.
// Go's flag package, which urfave/cli uses, stops at the first positional
// argument. Everything after "--" is left alone.
func reorder(cmds []*ucli.Command, args []string) commandLine {
	if len(args) == 0 {
		return commandLine{args: args}
	}
	out := []string{args[0]}
	var globals, flags, positional []string
	var cmd *ucli.Command
	verb := ""
	line := commandLine{}
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			line.dashed = true
			line.dashArgs = append([]string(nil), rest[i+1:]...)
			break
		}
		if verb == "" && !isFlag(a) {
			verb = a
			cmd = findCommand(cmds, a)
			if cmd == nil || a == "help" {
				// Unknown verb or help: leave the rest as written.
				out = append(out, globals...)
				out = append(out, rest[i:]...)
				return commandLine{args: out}
			}
			continue
		}
		if !isFlag(a) {
			positional = append(positional, a)
			continue
		}
		name, hasValue := flagName(a)
		takesValue, isGlobal := globalFlags[name]
		dst := &flags
		if isGlobal {
			dst = &globals
		} else if verb == "" {
			// A flag of the app itself (-h, --help) before the verb.
			dst = &globals
		} else {
			takesValue = flagTakesValue(cmd, name)
		}
		*dst = append(*dst, a)
		if takesValue && !hasValue && i+1 < len(rest) {
			i++
			*dst = append(*dst, rest[i])
		}
	}
	out = append(out, globals...)
	if verb != "" {
		out = append(out, verb)
	}
	out = append(out, flags...)
	if verb != "" && (len(positional) > 0 || line.dashed) {
		out = append(out, "--")
		out = append(out, positional...)
		out = append(out, line.dashArgs...)
	}
	line.args = out
	return line
}

// isFlag reports whether a looks like a flag: "-x" or "--xy", not "-".
func isFlag(a string) bool {
	return len(a) > 1 && a[0] == '-'
}

// flagName returns the name of a flag argument and whether it carries its
// value ("--tail=9").
func flagName(a string) (string, bool) {
	a = strings.TrimLeft(a, "-")
	if i := strings.IndexByte(a, '='); i >= 0 {
		return a[:i], true
	}
	return a, false
}

func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// flagTakesValue reports whether the command's flag called name takes a
// value. Unknown flags are treated as booleans; urfave/cli rejects them.
func flagTakesValue(cmd *ucli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			switch f.(type) {
			case *ucli.BoolFlag:
				return false
			}
			return true
		}
	}
	return false
}
