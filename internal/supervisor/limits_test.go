package supervisor

import (
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
)

// TestLimitsFor: a start's own caps replace the supervisor's per-scope cap
// and add one per label; the cap over all scopes stays the supervisor's.
func TestLimitsFor(t *testing.T) {
	t.Parallel()
	s := &Supervisor{cfg: Config{Limits: db.Limits{PerScope: 50, Total: 200}}}
	for _, c := range []struct {
		req  protocol.StartRequest
		want db.Limits
	}{
		{protocol.StartRequest{}, db.Limits{PerScope: 50, Total: 200}},
		{protocol.StartRequest{ScopeLimit: 200, LabelLimit: 50}, db.Limits{PerScope: 200, Total: 200, PerLabel: 50}},
		{protocol.StartRequest{ScopeLimit: -1, LabelLimit: -1}, db.Limits{PerScope: 50, Total: 200}},
	} {
		if got := s.limitsFor(c.req); got != c.want {
			t.Errorf("limitsFor(%+v) = %+v, want %+v", c.req, got, c.want)
		}
	}
}
