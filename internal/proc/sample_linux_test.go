package proc

import (
	"testing"
	"time"
)

// TestSampleAll: a live job's processes are summed: the main process and
// its grandchild, each with resident memory, and CPU time that grows
// while one of them spins.
func TestSampleAll(t *testing.T) {
	t.Parallel()
	j := startJob(t, helperCmd("fork-grandchild"))
	j.line(t) // the grandchild runs
	ss, ok := SampleAll([]Target{j.target})
	if !ok {
		t.Fatal("SampleAll: not supported on Linux")
	}
	s := ss[0]
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
		ss, _ := SampleAll([]Target{j.target, spin.target})
		if s := ss[1]; s.CPU > 0 && ss[0].Processes == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a spinning process shows no CPU time: %+v", ss)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ss, ok := SampleAll([]Target{{PID: 1 << 22, PGID: 1 << 22, PIDStart: 1}}); !ok || ss[0].Processes != 0 {
		t.Errorf("a job with no live process: %+v, %v", ss, ok)
	}
}
