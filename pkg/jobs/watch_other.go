//go:build !linux

package jobs

import (
	"context"
	"time"
)

// watcher sleeps until the database may have changed. Without inotify it
// sleeps a short fixed slice.
type watcher struct{}

func newWatcher(string) *watcher { return &watcher{} }

// watchNow has no quick slices to skip here.
func (w *watcher) watchNow() {}

// watchStatus changes nothing: the slices are short anyway.
func (w *watcher) watchStatus() {}

// Looked changes nothing: every wait is a short slice.
func (w *watcher) Looked(bool) {}

// Wait returns after at most d (100 ms slices), or with ctx's error.
func (w *watcher) Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(min(d, 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close releases nothing.
func (w *watcher) Close() {}
