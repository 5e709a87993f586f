package runner

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
)

// RunDetached runs the default supervisor of the database at dbPath in the
// foreground, as `jobs supervise` does: until it has had no running job for
// idle (0 means DefaultIdleExit, negative means never), or the process gets
// SIGTERM or SIGINT, or ctx ends. It returns an error wrapping
// ErrDefaultRunning when another supervisor already serves the database,
// which the CLI treats as success.
func RunDetached(ctx context.Context, dbPath string, idle time.Duration) error {
	return Supervise(ctx, dbPath, Config{IdleExit: idle})
}

// Supervise is RunDetached with more settings: cfg.DB is opened from
// dbPath, Kind is "detached" and Default is set; cfg.IdleExit 0 means
// DefaultIdleExit, negative means never; a nil Logf logs to stderr.
func Supervise(ctx context.Context, dbPath string, cfg Config) error {
	d, err := db.Open(ctx, dbPath)
	if err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	defer d.Close()
	cfg.DB, cfg.Kind, cfg.Default = d, "detached", true
	if cfg.Limits.PerScope == 0 {
		cfg.Limits.PerScope = envLimit("JOBS_MAX_RUNNING_PER_SCOPE")
	}
	if cfg.Limits.Total == 0 {
		cfg.Limits.Total = envLimit("JOBS_MAX_RUNNING")
	}
	switch {
	case cfg.IdleExit == 0:
		cfg.IdleExit = DefaultIdleExit
	case cfg.IdleExit < 0:
		cfg.IdleExit = 0
	}
	if cfg.Logf == nil {
		cfg.Logf = log.New(os.Stderr, "jobs supervise: ", log.LstdFlags).Printf
	}
	s, err := New(cfg)
	if err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.Open(ctx); err != nil {
		if errors.Is(err, ErrDefaultRunning) {
			return err
		}
		return fmt.Errorf("supervise: %w", err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
	}
	return s.Close()
}

// envLimit reads a running-jobs limit from the environment: a positive
// number, or 0 (the default) when unset or malformed.
func envLimit(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
