package supervisor

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/protocol"
)

// BenchmarkStart measures Supervisor.Start of /bin/true on a real database
// (job row and events written, process started, status running recorded)
// against starting the same process with os/exec in the same run. Each
// iteration also waits for the previous job to finish, outside the timer,
// so that ends do not pile up behind starts.
func BenchmarkStart(b *testing.B) {
	s := startSupervisor(b, Config{Logf: func(string, ...any) {}})
	ctx := context.Background()
	req := protocol.StartRequest{Job: db.NewJob{
		Scope: "bench", Command: "true", Argv: []string{"/bin/true"}, Cwd: "/", Stdin: "null",
		TTL: time.Minute,
	}}
	run := func(b *testing.B, startOne func() (wait func())) {
		for b.Loop() {
			wait := startOne()
			b.StopTimer()
			wait()
			b.StartTimer()
		}
	}
	b.Run("jobs", func(b *testing.B) {
		run(b, func() func() {
			job, err := s.Start(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			return func() { s.waitChild(job.ID) }
		})
	})
	b.Run("exec", func(b *testing.B) {
		run(b, func() func() {
			cmd := exec.Command("/bin/true")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			return func() { cmd.Wait() }
		})
	})
}

// waitChild waits until the supervisor is done with job id.
func (s *Supervisor) waitChild(id string) {
	s.runners.mu.Lock()
	c := s.runners.children[id]
	s.runners.mu.Unlock()
	if c != nil {
		<-c.done
	}
}

// BenchmarkShortJob runs `sh -c 'echo hi'` to its recorded end (status,
// output and all) against running the same command with os/exec and
// reading its output, in the same run: what a short job costs beyond the
// process itself.
func BenchmarkShortJob(b *testing.B) {
	s := startSupervisor(b, Config{Logf: func(string, ...any) {}})
	ctx := context.Background()
	req := protocol.StartRequest{Job: db.NewJob{
		Scope: "bench", Command: "echo hi", Argv: []string{"/bin/sh", "-c", "echo hi"}, Cwd: "/", Stdin: "null",
		TTL: time.Minute,
	}}
	b.Run("jobs", func(b *testing.B) {
		for b.Loop() {
			job, err := s.Start(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			s.waitChild(job.ID)
		}
	})
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if _, err := exec.Command("/bin/sh", "-c", "echo hi").Output(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
