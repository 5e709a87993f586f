package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentjobs/jobs/internal/parse"
	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/pkg/jobs"
	"github.com/pelletier/go-toml/v2"
	ucli "github.com/urfave/cli/v2"
)

// Where a setting's effective value came from, lowest precedence first: a
// flag beats the environment, which beats the file, which beats the
// built-in default.
const (
	fromDefault = "default"
	fromFile    = "file"
	fromEnv     = "env"
	fromFlag    = "flag"
)

// setting is one default a person can set: its key in the config file,
// the environment variables that set it (first set wins), the start flag
// that overrides it, and how its value is read.
type setting struct {
	key  string
	env  []string
	flag string
	// check validates a value from the file or the environment and
	// returns it as it is shown.
	check func(s string) (string, error)
	// builtin is the built-in default, as shown.
	builtin string
}

// settings are the CLI defaults the config file and the environment set.
// They shape what `jobs start` and the other verbs do when a flag is not
// given; jobs mcp serves its profile's documented defaults and reads none
// of them.
var settings = []setting{
	{key: "timeout", env: []string{"JOBS_TIMEOUT"}, flag: "timeout", check: checkDuration, builtin: shortDuration(jobs.DefaultTimeout)},
	{key: "ttl", env: []string{"JOBS_TTL", "PI_BASH_JOB_TTL_MS"}, flag: "ttl", check: checkDuration, builtin: shortDuration(jobs.DefaultTTL)},
	{key: "max_output", env: []string{"JOBS_MAX_OUTPUT"}, flag: "max-output", check: checkSize, builtin: parse.FormatSize(jobs.DefaultMaxOutput)},
	{key: "shell", env: []string{"JOBS_SHELL"}, flag: "shell", check: checkShell, builtin: "bash, else /bin/sh"},
	{key: "scope", env: []string{"JOBS_SCOPE"}, flag: "scope", check: checkScope, builtin: vocab.DefaultScope},
}

func checkDuration(s string) (string, error) {
	d, err := parse.Duration(s)
	if err != nil {
		return "", err
	}
	if d == 0 {
		return "0", nil // none
	}
	return shortDuration(d), nil
}

func checkSize(s string) (string, error) {
	n, err := parse.Size(s)
	if err != nil {
		return "", err
	}
	return parse.FormatSize(n), nil
}

func checkShell(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", errors.New("empty shell")
	}
	return s, nil
}

func checkScope(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty scope")
	}
	return s, nil
}

// value is a setting's effective value and where it came from.
type value struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
	// Origin names the file or the environment variable, when one set it.
	Origin string `json:"origin,omitempty"`
	// raw is the value as given, for the verbs to parse; "" for a default.
	raw string
}

// config is the effective configuration of one invocation.
type config struct {
	path   string // the config file's path, whether or not it exists
	exists bool
	values map[string]value
}

// configPath is $XDG_CONFIG_HOME/jobs/config.toml, else
// ~/.config/jobs/config.toml.
func configPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the config file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "jobs", "config.toml"), nil
}

// loadConfig reads the config file, when there is one, and the
// environment. A value that does not parse is an error naming the file
// (or the variable) and the key, so that a person finds it at once.
func loadConfig() (*config, error) {
	path, err := configPath()
	if err != nil {
		return nil, err
	}
	cfg := &config{path: path, values: map[string]value{}}
	file := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("config file %s: %w", textclean.Echo(path), err)
	default:
		cfg.exists = true
		if err := toml.Unmarshal(data, &file); err != nil {
			var de *toml.DecodeError
			if errors.As(err, &de) {
				row, col := de.Position()
				return nil, fmt.Errorf("config file %s: line %d column %d: %s", textclean.Echo(path), row, col, oneLine(de.Error()))
			}
			return nil, fmt.Errorf("config file %s: %v", textclean.Echo(path), err)
		}
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.key] = true
	}
	var keys []string
	for k := range file {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !known[k] {
			return nil, fmt.Errorf("config file %s: unknown key %s (known: %s)", textclean.Echo(path), quoted(k), strings.Join(settingKeys(), ", "))
		}
	}
	for _, s := range settings {
		v := value{Key: s.key, Value: s.builtin, Source: fromDefault}
		if raw, ok := file[s.key]; ok {
			str, err := tomlString(raw)
			if err == nil {
				v.Value, err = s.check(str)
			}
			if err != nil {
				return nil, fmt.Errorf("config file %s: key %s: %v", textclean.Echo(path), s.key, err)
			}
			v.Source, v.Origin, v.raw = fromFile, path, str
		}
		for _, name := range s.env {
			str := os.Getenv(name)
			if str == "" {
				continue
			}
			if strings.HasSuffix(name, "_MS") {
				// The original interfaces' variables hold milliseconds.
				ms, err := strconv.ParseInt(strings.TrimSpace(str), 10, 64)
				if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxDuration {
					return nil, fmt.Errorf("invalid %s=%s: want milliseconds, such as 10000", name, quoted(str))
				}
				str = (time.Duration(ms) * time.Millisecond).String()
			}
			shown, err := s.check(str)
			if err != nil {
				return nil, fmt.Errorf("invalid %s=%s (%s): %v", name, quoted(str), s.key, err)
			}
			v.Value, v.Source, v.Origin, v.raw = shown, fromEnv, name, str
			break
		}
		cfg.values[s.key] = v
	}
	return cfg, nil
}

func settingKeys() []string {
	var ks []string
	for _, s := range settings {
		ks = append(ks, s.key)
	}
	return ks
}

// tomlString takes a TOML value as the text a flag would hold: a string
// as it is, an integer (a size in bytes, or 0 for none) as digits.
func tomlString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("want a string such as \"2h\" or \"256MiB\", not %s", tomlKind(v))
}

// tomlKind names a TOML value's kind as the file's author wrote it.
func tomlKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case bool:
		return "a boolean"
	case float64:
		return "a float"
	}
	return "a date or time"
}

// config loads the configuration once per invocation.
func (r *runner) config() (*config, error) {
	if r.cfg == nil {
		cfg, err := loadConfig()
		if err != nil {
			return nil, err
		}
		r.cfg = cfg
	}
	return r.cfg, nil
}

// configured returns the value as given for key when the file or the
// environment set it and the flag of that name was not given.
func (r *runner) configured(key string) (string, bool, error) {
	cfg, err := r.config()
	if err != nil {
		return "", false, err
	}
	v := cfg.values[key]
	if v.Source == fromDefault {
		return "", false, nil
	}
	for _, s := range settings {
		if s.key == key && r.flagGiven(s.flag) {
			return "", false, nil
		}
	}
	return v.raw, true, nil
}

// flagGiven reports whether the command line holds --name (not an
// environment variable bound to the flag).
func (r *runner) flagGiven(name string) bool {
	for _, a := range r.line.args[1:] {
		if a == "--" {
			break
		}
		if n, _ := flagName(a); isFlag(a) && n == name {
			return true
		}
	}
	return false
}

// scope is the scope an invocation works in: --scope, else JOBS_SCOPE,
// else the config file's, else "" (the engine's default). jobs mcp leaves
// the file out: a server's scope is its client's configuration (see
// runMCP).
func (r *runner) scope(cc *ucli.Context) (string, error) {
	if s := cc.String("scope"); s != "" || cc.Command == nil || cc.Command.Name == "mcp" || cc.Command.Hidden {
		return s, nil
	}
	s, ok, err := r.configured("scope")
	if err != nil || !ok {
		return "", err
	}
	return s, nil
}

func (r *runner) configCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "config",
		Usage: "show the effective defaults and where each came from",
		Description: "Defaults come from $XDG_CONFIG_HOME/jobs/config.toml (else ~/.config/jobs/config.toml),\n" +
			"then the environment, then the flags; each value shows its source: default, file, env\n" +
			"or flag. Keys: timeout, ttl (durations such as \"2h\", \"0\" for none), max_output (a\n" +
			"size such as \"256MiB\", 0 for no cap), shell, scope. Environment: JOBS_TIMEOUT, JOBS_TTL\n" +
			"(or PI_BASH_JOB_TTL_MS), JOBS_MAX_OUTPUT, JOBS_SHELL, JOBS_SCOPE. jobs mcp serves its\n" +
			"profile's documented defaults and reads none of these.\n\n" +
			"   timeout = \"0\"        # dev servers run until stopped\n" +
			"   ttl = \"168h\"\n" +
			"   max_output = \"256MiB\"",
		Action: func(cc *ucli.Context) error {
			if cc.Args().Present() {
				return usagef("config", "config takes no arguments")
			}
			cfg, err := r.config()
			if err != nil {
				return err
			}
			var vals []value
			for _, s := range settings {
				v := cfg.values[s.key]
				if r.flagGiven(s.flag) {
					// Only --scope is global; the start flags are shown
					// as the file and environment leave them.
					if s.key == "scope" {
						v.Value, v.Source, v.Origin = cc.String("scope"), fromFlag, "--scope"
					}
				}
				vals = append(vals, v)
			}
			if jsonOut(cc) {
				return r.printJSON(struct {
					File   string  `json:"file"`
					Exists bool    `json:"file_exists"`
					Values []value `json:"values"`
				}{cfg.path, cfg.exists, vals})
			}
			state := "not present"
			if cfg.exists {
				state = "read"
			}
			fmt.Fprintf(r.stdout, "config file: %s (%s)\n", textclean.Echo(cfg.path), state)
			tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
			for _, v := range vals {
				src := v.Source
				if v.Source == fromEnv || v.Source == fromFlag {
					src += " " + v.Origin
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Key, shown(v.Value), src)
			}
			return tw.Flush()
		},
	}
}

// startDefaults fills the Spec fields whose flags were not given from the
// config file and the environment; the flags, parsed after, override them.
// A shell set there applies to a one-argument command line only, as
// --shell does.
func (r *runner) startDefaults(cc *ucli.Context, spec *jobs.Spec) error {
	for _, key := range []string{"timeout", "ttl", "max_output", "shell"} {
		s, ok, err := r.configured(key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		// Checked when loaded: these parse.
		switch key {
		case "timeout":
			d, _ := parse.Duration(s)
			spec.Timeout = noneIfZero(d)
		case "ttl":
			d, _ := parse.Duration(s)
			spec.TTL = noneIfZero(d)
		case "max_output":
			n, _ := parse.Size(s)
			spec.MaxOutput = n
			if n == 0 {
				spec.MaxOutput = jobs.Unlimited
			}
		case "shell":
			if spec.Command != "" && !cc.IsSet("shell") {
				spec.Shell = s
			}
		}
	}
	return nil
}
