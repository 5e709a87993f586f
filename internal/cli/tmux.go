package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	ucli "github.com/urfave/cli/v2"
)

func (r *runner) captureCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "capture",
		Usage:     "print a tmux job's screen as text",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.Int64Flag{Name: "lines", Usage: "include `N` lines of scrollback above the screen"},
		},
		Action: func(cc *ucli.Context) error {
			ref, err := oneRef(cc)
			if err != nil {
				return err
			}
			n := cc.Int64("lines")
			if err := nonNegative("capture", "lines", n); err != nil {
				return err
			}
			c, err := r.client(cc)
			if err != nil {
				return err
			}
			text, err := c.Capture(cc.Context, ref, int(n))
			if err != nil {
				return err
			}
			if jsonOut(cc) {
				return r.printJSON(captureResult{Ref: ref, Screen: text})
			}
			fmt.Fprint(r.stdout, ensureNewline(text))
			return nil
		},
	}
}

// captureResult is the JSON of jobs capture.
type captureResult struct {
	Ref    string `json:"ref"`
	Screen string `json:"screen"`
}

func (r *runner) sendKeysCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "send-keys",
		Usage:     "send keystrokes to a tmux or pty job",
		ArgsUsage: "ID KEYS…",
		Description: "As tmux does: each of KEYS that is a key name (Enter, Tab, Escape, Up, C-c, M-x, F5,\n" +
			"a single character) is pressed, any other is typed, so `send-keys ID 'ls -la' Enter` runs\n" +
			"ls. --literal TEXT types the text exactly as given, key names included.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "literal", Aliases: []string{"l"}, Usage: "send `TEXT` as typed"},
		},
		Action: func(cc *ucli.Context) error {
			const verb = "send-keys"
			a := args(cc)
			literal := cc.IsSet("literal")
			switch {
			case len(a) == 0:
				return usagef(verb, "missing job id or name")
			case a[0] == "":
				return usagef(verb, "empty job id")
			case literal && len(a) > 1:
				return usagef(verb, "give KEYS or --literal TEXT, not both")
			case !literal && len(a) == 1:
				return usagef(verb, "missing KEYS (such as Enter or C-c) or --literal TEXT")
			}
			keys := a[1:]
			for _, k := range keys {
				if k == "" {
					return usagef(verb, "empty key: give a key name such as Enter or text to type")
				}
			}
			if literal {
				keys = []string{cc.String("literal")}
			}
			c, err := r.client(cc)
			if err != nil {
				return err
			}
			if err := c.SendKeys(cc.Context, a[0], keys, literal); err != nil {
				return err
			}
			if jsonOut(cc) {
				return r.printJSON(sendKeysResult{Ref: a[0], Keys: keys, Literal: literal})
			}
			return nil
		},
	}
}

// sendKeysResult is the JSON of jobs send-keys.
type sendKeysResult struct {
	Ref     string   `json:"ref"`
	Keys    []string `json:"keys"`
	Literal bool     `json:"literal"`
}

func (r *runner) attachCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "attach",
		Usage:       "attach this terminal to a tmux job (detach with C-b d)",
		ArgsUsage:   "ID",
		Description: "With --json, prints the command that attaches instead of running it.",
		Action: func(cc *ucli.Context) error {
			ref, c, err := r.refAndClient(cc)
			if err != nil {
				return err
			}
			argv, err := c.AttachCommand(cc.Context, ref)
			if err != nil {
				return err
			}
			if jsonOut(cc) {
				return r.printJSON(attachResult{Ref: ref, Argv: argv})
			}
			if len(argv) == 0 {
				return fmt.Errorf("attach %s: no attach command", ref)
			}
			path, err := exec.LookPath(argv[0])
			if err != nil {
				return fmt.Errorf("attach: %s not found in PATH", argv[0])
			}
			argv, env := attachFromHere(argv, os.Getenv("TMUX"), attachSocket(argv), os.Environ())
			r.close()
			return syscall.Exec(path, argv, env)
		},
	}
}

// attachResult is the JSON of jobs attach.
type attachResult struct {
	Ref  string   `json:"ref"`
	Argv []string `json:"argv"`
}

// attachSocket is the server the attach command names (-L NAME or -S
// PATH, the one recorded with the job), "" for tmux's default.
func attachSocket(argv []string) string {
	for i := 1; i+1 < len(argv); i++ {
		if argv[i] == "-L" || argv[i] == "-S" {
			return argv[i+1]
		}
	}
	return ""
}

// attachFromHere adapts tmux's attach command to where it runs. Inside a
// tmux client of the same (default) server, attach would refuse to nest:
// switching the client to the job's session is what a person means. Inside
// another server's client, attach works once TMUX is out of the way.
func attachFromHere(argv []string, tmuxVar, jobsSocket string, environ []string) ([]string, []string) {
	if tmuxVar == "" {
		return argv, environ
	}
	socket, _, _ := strings.Cut(tmuxVar, ",")
	if jobsSocket == "" && filepath.Base(socket) == "default" && len(argv) >= 2 && argv[len(argv)-2] == "-t" {
		return []string{argv[0], "switch-client", "-t", argv[len(argv)-1]}, environ
	}
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			env = append(env, kv)
		}
	}
	return argv, env
}
