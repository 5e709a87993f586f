package tmuxjob

import (
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	env := []string{"A=1", "TERM=xterm", "PATH=/bin", "BIG=" + strings.Repeat("x", 500), "TMUX=/tmp/s,1,0", "MINE=v", "JOBS_ID=abc", "Z=2"}
	got := Env(env, []string{"MINE"}, 100)
	want := []string{"A=1", "PATH=/bin", "MINE=v", "JOBS_ID=abc", "Z=2"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
	if got := Env(env, nil, 1<<20); !slices.Contains(got, env[3]) || slices.Contains(got, "TERM=xterm") {
		t.Errorf("Env with room = %q", got)
	}
}
