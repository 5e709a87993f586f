package cli

import (
	"context"
	"errors"
	"time"

	"github.com/agentjobs/jobs/internal/supervisor"
	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/agentjobs/jobs/pkg/jobs"
)

// runSupervisor runs the database's default supervisor in the foreground
// until it has been idle for idle (0: never) or it is signalled. A
// supervisor already serving the database is success: the CLI spawns
// `jobs supervise` on first need and two may race.
func runSupervisor(ctx context.Context, dbPath string, idle time.Duration) error {
	if idle == 0 {
		idle = -1 // RunDetached: 0 means its default, negative means never
	}
	err := supervisor.RunDetached(ctx, dbPath, idle)
	if errors.Is(err, vocab.ErrDefaultRunning) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func defaultDBPath() (string, error) { return jobs.DefaultDBPath() }
