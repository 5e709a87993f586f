package supervisor

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
	"github.com/agentjobs/jobs/internal/sigreset"
	"github.com/agentjobs/jobs/internal/vocab"
)

// RunDetached runs the default supervisor of the database at dbPath in the
// foreground, as `jobs supervise` does: until it has had no running job for
// idle (0 means DefaultIdleExit, negative means never), or the process gets
// SIGTERM or SIGINT, or ctx ends. It returns an error wrapping
// vocab.ErrDefaultRunning when another supervisor already serves the database,
// which the CLI treats as success.
func RunDetached(ctx context.Context, dbPath string, idle time.Duration) error {
	return Supervise(ctx, dbPath, Config{IdleExit: idle})
}

// Supervise is RunDetached with more settings: cfg.DB is opened from
// dbPath, Kind is "detached" and Default is set; cfg.IdleExit 0 means
// DefaultIdleExit, negative means never; a nil Logf logs to stderr.
//
// It is meant to be a process's main: it first sheds what the process
// inherited from its launcher and must not pass on to jobs (see
// shedInheritance).
func Supervise(ctx context.Context, dbPath string, cfg Config) error {
	shedInheritance()
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
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = envDuration("JOBS_DRAIN_TIMEOUT")
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
		if errors.Is(err, vocab.ErrDefaultRunning) {
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

// envDuration reads a positive duration (Go syntax: 2s, 1m) from the
// environment, or 0 (the default) when unset or malformed.
func envDuration(name string) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// shedInheritance drops what the launching shell gave this process and
// every job would otherwise inherit: descriptors above stderr (the
// launcher's pipes would stay open as long as the supervisor or any job
// lives) and ignored signals. A job must start with default dispositions
// whoever started the supervisor: under nohup SIGHUP arrives ignored, in a
// background list of a script SIGINT does. Go resets handled signals to
// the default in a child but leaves ignored ones ignored, and it keeps an
// inherited SIG_IGN for SIGHUP and SIGINT, and for the signals it leaves
// alone unless asked (SIGTSTP, SIGTTIN, SIGTTOU); so every ignored signal
// is handled here, by a channel nobody reads. The supervisor itself stays
// deaf to them, and SIGINT ends it as SIGTERM does (Supervise listens for
// both). A blocked signal cannot be shed this way (Go hands its children
// the mask it started with): each job then starts through sigreset's shim.
func shedInheritance() {
	closeInheritedFDs()
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	_, ignored := sigreset.Inherited()
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		if ignored&(1<<(sig-1)) != 0 && sig != syscall.SIGKILL && sig != syscall.SIGSTOP {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
}
