package jobs_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

func TestJobJSONDurationsInMilliseconds(t *testing.T) {
	j := jobs.Job{ID: "k3v9q2m4x7b1a", Runtime: 1500 * time.Millisecond, Timeout: 90 * time.Second, TTL: 5 * time.Minute, UserCPU: 20 * time.Millisecond}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"runtime_ms":1500`, `"timeout_ms":90000`, `"ttl_ms":300000`, `"user_cpu_ms":20`, `"id":"k3v9q2m4x7b1a"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	var back jobs.Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Runtime != j.Runtime || back.Timeout != j.Timeout || back.TTL != j.TTL || back.UserCPU != j.UserCPU || back.ID != j.ID {
		t.Errorf("round trip: %+v, want %+v", back, j)
	}
	p, err := json.Marshal(jobs.PollResult{Job: j, RetryIn: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), `"retry_in_ms":2000`) || !strings.Contains(string(p), `"timeout_ms":90000`) {
		t.Errorf("poll JSON: %s", p)
	}
}
