// Package startstop gives the long-lived parts of a supervisor one start
// and stop contract, as river's package of the same name does for its
// services: a Service starts its goroutines in Start and, in Stop, ends
// them and waits for them. An owner starts its services in order and stops
// them in the reverse order (StartAll, StopAll), so that each service is
// stopped before those it uses.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is a part that starts and stops.
type Service interface {
	// Start starts the service's work and returns once it is under
	// way; the goroutines it starts run until Stop. ctx bounds what
	// Start does itself and gives its values to the service's own
	// context, not its cancellation: only Stop ends a service. A
	// service whose Start fails has started nothing that needs a Stop.
	Start(ctx context.Context) error
	// Stop ends what Start started, releases what it holds and returns
	// once every goroutine of the service has returned, with what went
	// wrong on the way. It tolerates a service that never started (or
	// failed to) and a second Stop, which return nil.
	Stop() error
}

// StartAll starts services in order and returns the first error. It stops
// none: after a failure the owner calls StopAll on them all, which stops
// those that started.
func StartAll(ctx context.Context, services ...Service) error {
	for _, s := range services {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// StopAll stops services in the reverse of their order, the last started
// first, so that none is stopped before a service that uses it. It returns
// their errors joined.
func StopAll(services ...Service) error {
	var errs []error
	for i := len(services) - 1; i >= 0; i-- {
		if err := services[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Base is embedded in a service that owns goroutines. Init, at the start
// of Start, makes the service's context; Go starts a goroutine the service
// owns; Halt, in Stop, cancels the context and waits for every such
// goroutine.
type Base struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
}

// Init makes the service's context from ctx's values; it is cancelled by
// Halt alone.
func (b *Base) Init(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
}

// Context is the service's context: done once Halt began. Before Init it
// is context.Background.
func (b *Base) Context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return context.Background()
	}
	return b.ctx
}

// Go runs f in a goroutine that Halt waits for, and reports whether it
// did: before Init and once Halt began, f is not run.
func (b *Base) Go(f func(ctx context.Context)) bool {
	b.mu.Lock()
	if b.stopped || b.ctx == nil {
		b.mu.Unlock()
		return false
	}
	ctx := b.ctx
	b.wg.Add(1) // under mu: ordered before Halt's Wait
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		f(ctx)
	}()
	return true
}

// Halt cancels the service's context and waits for its goroutines.
func (b *Base) Halt() {
	b.mu.Lock()
	b.stopped = true
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	b.wg.Wait()
}
