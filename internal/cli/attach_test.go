package cli

import (
	"slices"
	"testing"
)

func TestAttachFromHere(t *testing.T) {
	attach := []string{"tmux", "attach-session", "-t", "=jobs-abc"}
	env := []string{"HOME=/h", "TMUX=/tmp/tmux-0/default,123,0", "TMUX_PANE=%1"}
	for _, tt := range []struct {
		name, tmuxVar, socket string
		wantArgv              []string
		wantTMUX              bool
	}{
		{"outside tmux", "", "", attach, true},
		{"inside the default server", "/tmp/tmux-0/default,123,0", "", []string{"tmux", "switch-client", "-t", "=jobs-abc"}, true},
		{"inside another server", "/tmp/tmux-0/work,123,0", "", attach, false},
		{"jobs on a private server", "/tmp/tmux-0/default,123,0", "private", attach, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			argv, gotEnv := attachFromHere(attach, tt.tmuxVar, tt.socket, env)
			if !slices.Equal(argv, tt.wantArgv) {
				t.Errorf("argv = %q, want %q", argv, tt.wantArgv)
			}
			if got := slices.Contains(gotEnv, env[1]); got != tt.wantTMUX {
				t.Errorf("TMUX kept = %v, want %v", got, tt.wantTMUX)
			}
		})
	}
}
