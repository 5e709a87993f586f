package proc

import (
	"testing"
	"time"
)

// TestSampleOf: a live job's processes are summed: the main process and
// its grandchild, each with resident memory, and CPU time that grows
// while one of them spins.
func TestSampleOf(t *testing.T) {
	t.Parallel()
	j := startJob(t, helperCmd("fork-grandchild"))
	j.line(t) // the grandchild runs
	s, ok := SampleOf(j.target)
	if !ok {
		t.Fatal("SampleOf: not supported on Linux")
	}
	if s.Processes != 2 || s.RSSKB <= 0 {
		t.Errorf("sample %+v, want 2 processes with resident memory", s)
	}
	if total := MemTotalKB(); total <= s.RSSKB {
		t.Errorf("MemTotalKB = %d, not above the sample's %d", total, s.RSSKB)
	}

	spin := startJob(t, helperCmd("spin"))
	spin.line(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, _ := SampleOf(spin.target)
		if s.CPU > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a spinning process shows no CPU time: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s, ok := SampleOf(Target{PID: 1 << 22, PIDStart: 1}); !ok || s.Processes != 0 {
		t.Errorf("a job with no live process: %+v, %v", s, ok)
	}
}
