package proc

import (
	"os/exec"
	"testing"
)

// TestMainWaitsForInput: the listing's cheap checks (MainWaitsForInput,
// and MainWaitsOnStdin from the stat just read) see a single-threaded main
// process blocked reading its stdin, and not one that sleeps or reads
// another pipe.
func TestMainWaitsForInput(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want bool
	}{
		{"sh read", []string{"sh", "-c", "read x"}, true},
		{"cat", []string{"cat"}, true},
		{"python3 input", []string{"python3", "-c", "input()"}, true},
		{"sleep", []string{"sleep", "30"}, false},
		{"command substitution", []string{"sh", "-c", "x=$(sleep 30)"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Side by side (a job each; no reaper runs during this test):
			// python3 alone takes seconds to start on a loaded machine.
			t.Parallel()
			if _, err := exec.LookPath(tt.argv[0]); err != nil {
				t.Skipf("%s not installed", tt.argv[0])
			}
			j := startJob(t, exec.Command(tt.argv[0], tt.argv[1:]...))
			if tt.want {
				eventually(t, patience, "input-wait", func() bool {
					return MainWaitsForInput(j.target.PID, j.inode)
				})
				eventually(t, patience, "input-wait from the stat", func() bool {
					main, err := Inspect(j.target.PID)
					return err == nil && MainWaitsOnStdin(main)
				})
				if MainWaitsForInput(j.target.PID, j.inode+1) {
					t.Error("MainWaitsForInput on another pipe's inode = true")
				}
				return
			}
			eventually(t, patience, "the job to settle", func() bool {
				return allSleeping(j.target)
			})
			if MainWaitsForInput(j.target.PID, j.inode) {
				t.Error("MainWaitsForInput = true")
			}
			if main, err := Inspect(j.target.PID); err != nil || MainWaitsOnStdin(main) {
				t.Errorf("MainWaitsOnStdin = true (or inspect: %v)", err)
			}
		})
	}
}
