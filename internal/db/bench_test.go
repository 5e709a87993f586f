package db

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// BenchmarkJobLife records the life of a job as a supervisor does: created
// (starting), running, done with its counts. Each op is three write
// transactions.
func BenchmarkJobLife(b *testing.B) {
	d, err := Open(context.Background(), filepath.Join(b.TempDir(), "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	n := NewJob{Scope: "bench", Command: "make test", Argv: []string{"sh", "-c", "make test"},
		Cwd: "/src/project", EnvNames: []string{"CI"}, Stdin: "pipe", TTL: time.Hour}
	code := 0
	for b.Loop() {
		j, err := d.CreateJob(ctx, n, Limits{PerScope: 50, Total: 200})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Transition(ctx, j.ID, Transition{To: vocab.StatusRunning, PID: 4242, PGID: 4242, PIDStart: 1}); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Transition(ctx, j.ID, Transition{To: vocab.StatusDone, ExitCode: &code,
			Usage: &Usage{UserCPU: time.Millisecond}, Runtime: time.Second,
			Output: &OutputTotals{Bytes: 1234, Lines: 56}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenNewFile is a first command's set-up: Open on a path where
// no database is yet (the latest schema in one transaction).
func BenchmarkOpenNewFile(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		d, err := Open(ctx, filepath.Join(b.TempDir(), "jobs.db"))
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
}
