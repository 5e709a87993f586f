package jobs_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// BenchmarkPollTail: a poll of a finished job with 1 MiB of output, lines
// of varied length with colour codes, as an agent's poll reads it: cleaned,
// the default 500 characters.
func BenchmarkPollTail(b *testing.B) {
	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{DB: filepath.Join(b.TempDir(), "jobs.db"), Scope: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	j, err := c.Start(ctx, jobs.Spec{Command: `i=0; while [ $i -lt 16000 ]; do i=$((i+1)); printf '\033[32mok\033[0m line %d %*s\n' $i $((i % 90)) x; done`})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := c.Poll(ctx, j.ID, jobs.PollOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
