package mcp

import (
	"testing"
	"time"
)

// pause and resume stop and continue a session's processes, and poll says
// stopped while it is.
func TestStdioPauseResume(t *testing.T) {
	t.Parallel()
	cs := newEnv(t).serve(t, "pause", nil)
	id := start(t, cs, `echo ready; while :; do sleep 0.1; done`, nil)
	if p := callOK[pollResult](t, cs, "process", map[string]any{"action": "wait", "sessionId": id, "until": "ready", "timeout": 20}); p.WaitReason != "matched" {
		t.Fatalf("wait for ready: %+v", p)
	}
	k := callOK[killResult](t, cs, "process", map[string]any{"action": "pause", "sessionId": id})
	if k.Signal != "STOP" || len(k.Signalled) == 0 {
		t.Fatalf("pause: %+v, want STOP sent", k)
	}
	waitFor(t, "the session to show stopped", 10*time.Second, func() bool {
		p := callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id})
		return p.Stopped && p.Status == "running"
	})
	if k := callOK[killResult](t, cs, "process", map[string]any{"action": "resume", "sessionId": id}); k.Signal != "CONT" {
		t.Fatalf("resume: %+v, want CONT sent", k)
	}
	waitFor(t, "the session to run again", 10*time.Second, func() bool {
		return !callOK[pollResult](t, cs, "process", map[string]any{"action": "poll", "sessionId": id}).Stopped
	})
	callOK[killResult](t, cs, "kill_process", map[string]any{"action": "kill", "sessionId": id})
}
