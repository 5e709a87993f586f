package mcp

import (
	"fmt"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// A damaged or replaced database reaches the model in the database's own
// words, without the verbs the error passed through.
func TestDescribeDatabaseErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("start job: create job: %w", &jobs.CorruptError{Path: "/x/jobs.db", Cause: "database disk image is malformed (11)"}),
			"database corrupt: /x/jobs.db: database disk image is malformed (11)"},
		{fmt.Errorf("start job: %w", &jobs.ReplacedError{Path: "/x/jobs.db"}),
			"database /x/jobs.db was removed or replaced while the supervisor ran; start again"},
	} {
		if got := describe("", tc.err).Error(); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
