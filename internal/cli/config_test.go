package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configEnv is an env whose config file lives in dir/jobs/config.toml.
func configEnv(t *testing.T, toml string) (*env, string) {
	t.Helper()
	e := newEnv(t)
	dir := t.TempDir()
	e.extra = append(e.extra, "XDG_CONFIG_HOME="+dir)
	path := filepath.Join(dir, "jobs", "config.toml")
	if toml != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e, path
}

type configShown struct {
	File   string `json:"file"`
	Exists bool   `json:"file_exists"`
	Values []struct {
		Key, Value, Source, Origin string
	} `json:"values"`
}

func (c configShown) get(t *testing.T, key string) (value, source string) {
	t.Helper()
	for _, v := range c.Values {
		if v.Key == key {
			return v.Value, v.Source
		}
	}
	t.Fatalf("no key %s in %+v", key, c)
	return "", ""
}

func showConfig(t *testing.T, e *env, args ...string) configShown {
	t.Helper()
	var c configShown
	out := e.ok(append([]string{"config", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return c
}

func TestConfigDefaults(t *testing.T) {
	e, path := configEnv(t, "")
	c := showConfig(t, e)
	if c.File != path || c.Exists {
		t.Errorf("file %q exists %v, want %q absent", c.File, c.Exists, path)
	}
	for _, kv := range [][2]string{{"timeout", "30m"}, {"ttl", "30m"}, {"max_output", "64 MiB"}, {"scope", "default"}} {
		v, src := c.get(t, kv[0])
		if v != kv[1] || src != "default" {
			t.Errorf("%s = %q from %s, want %q from default", kv[0], v, src, kv[1])
		}
	}
}

// TestConfigSetsStartDefaults: the file sets the defaults a start without
// flags gets, the environment beats the file, a flag beats both, and
// jobs config says where each value came from.
func TestConfigSetsStartDefaults(t *testing.T) {
	e, _ := configEnv(t, "timeout = \"0\"\nttl = \"48h\"\nmax_output = 1048576\nshell = \"/bin/sh\"\nscope = \"people\"\n")
	e.extra = append(e.extra, "JOBS_TTL=2h")
	c := showConfig(t, e)
	for _, kv := range [][3]string{{"timeout", "0", "file"}, {"ttl", "2h", "env"}, {"max_output", "1 MiB", "file"}, {"shell", "/bin/sh", "file"}, {"scope", "people", "file"}} {
		if v, src := c.get(t, kv[0]); v != kv[1] || src != kv[2] {
			t.Errorf("%s = %q from %s, want %q from %s", kv[0], v, src, kv[1], kv[2])
		}
	}
	if v, src := showConfig(t, e, "--scope", "other").get(t, "scope"); v != "other" || src != "flag" {
		t.Errorf("scope = %q from %s with --scope, want other from flag", v, src)
	}

	id := e.start("true")
	var st struct {
		Job struct {
			Scope     string   `json:"scope"`
			Argv      []string `json:"argv"`
			Timeout   int64    `json:"timeout_ms"`
			TTL       int64    `json:"ttl_ms"`
			MaxOutput int64    `json:"max_output"`
		} `json:"job"`
	}
	j := &st.Job
	if err := json.Unmarshal([]byte(e.ok("status", id, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if j.Scope != "people" || j.Timeout != 0 || j.TTL != 2*3600*1000 || j.MaxOutput != 1<<20 || len(j.Argv) == 0 || j.Argv[0] != "/bin/sh" {
		t.Errorf("job from config: %+v", j)
	}

	id = e.start("--timeout", "5m", "--max-output", "2MiB", "true")
	j.Argv = nil
	if err := json.Unmarshal([]byte(e.ok("status", id, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if j.Timeout != 5*60*1000 || j.MaxOutput != 2<<20 {
		t.Errorf("flags did not override the config: %+v", j)
	}
}

// TestConfigBadFile: a file that does not parse, an unknown key or a bad
// value is one line naming the file and the key, and a non-zero exit,
// for any verb that reads the defaults.
func TestConfigBadFile(t *testing.T) {
	for _, tc := range []struct{ name, toml, want string }{
		{"value", "timeout = \"5 parsecs\"\n", "key timeout"},
		{"type", "ttl = true\n", "key ttl"},
		{"array", "timeout = [1, 2]\n", "key timeout: want a string such as \"2h\" or \"256MiB\", not an array"},
		{"unknown", "timout = \"1h\"\n", `unknown key "timout"`},
		{"syntax", "timeout = \n", "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, path := configEnv(t, tc.toml)
			for _, args := range [][]string{{"config"}, {"start", "true"}, {"list"}} {
				r := e.run2(args...)
				checkError(t, r, 1, tc.want)
				if !strings.Contains(r.stderr, path) {
					t.Errorf("error does not name %s: %v", path, r)
				}
			}
		})
	}
	e, _ := configEnv(t, "")
	e.extra = append(e.extra, "JOBS_MAX_OUTPUT=lots")
	checkError(t, e.run2("start", "true"), 1, "JOBS_MAX_OUTPUT")
}

// TestConfigScopeCompletion: completion offers the jobs of the config
// file's scope, as the verbs use it.
func TestConfigScopeCompletion(t *testing.T) {
	e, _ := configEnv(t, "scope = \"people\"\n")
	e.start("--name", "mine", "sleep 300")
	if out := e.ok("__complete", "bash", "kill", ""); !strings.Contains(out, "\nmine\n") {
		t.Errorf("completion of kill in the config's scope: %q", out)
	}
}
