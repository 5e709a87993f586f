package db

import (
	"context"
	"errors"
	"testing"

	"github.com/agentjobs/jobs/internal/vocab"
)

func TestRequestStop(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	j := create(t, d, "s", "")
	move(t, d, j.ID, vocab.StatusRunning)

	if got, err := d.StopRequested(ctx, j.ID); got != "" || err != nil {
		t.Fatalf("StopRequested of a fresh job = %q, %v; want empty", got, err)
	}
	if err := d.RequestStop(ctx, j.ID, vocab.StatusKilled); err != nil {
		t.Fatal(err)
	}
	// The first request wins: a timeout during a kill stays a kill.
	if err := d.RequestStop(ctx, j.ID, vocab.StatusTimedOut); err != nil {
		t.Fatal(err)
	}
	if got, err := d.StopRequested(ctx, j.ID); got != vocab.StatusKilled || err != nil {
		t.Errorf("StopRequested = %q, %v; want killed", got, err)
	}

	// A finished job takes no request, quietly.
	done := create(t, d, "s", "")
	move(t, d, done.ID, vocab.StatusRunning, vocab.StatusDone)
	if err := d.RequestStop(ctx, done.ID, vocab.StatusTimedOut); err != nil {
		t.Errorf("RequestStop of a finished job = %v, want nil", err)
	}
	if got, _ := d.StopRequested(ctx, done.ID); got != "" {
		t.Errorf("finished job got stop request %q", got)
	}

	if err := d.RequestStop(ctx, j.ID, vocab.StatusDone); err == nil {
		t.Error("RequestStop(done) = nil, want an error")
	}
	if err := d.RequestStop(ctx, "nosuchjob", vocab.StatusKilled); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("RequestStop of a missing job = %v, want vocab.ErrNotFound", err)
	}
	if _, err := d.StopRequested(ctx, "nosuchjob"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("StopRequested of a missing job = %v, want vocab.ErrNotFound", err)
	}
	// The schema refuses other values too.
	if _, err := d.ExecContext(ctx, `UPDATE jobs SET stop_requested = 'done' WHERE id = ?`, j.ID); err == nil {
		t.Error("the schema accepted stop_requested = 'done'")
	}
}

func TestKeepTmux(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	j := create(t, d, "s", "")
	if keep, err := d.KeepTmux(ctx, j.ID); keep || err != nil {
		t.Fatalf("KeepTmux of a new job = %v, %v; want false", keep, err)
	}
	if err := d.SetKeepTmux(ctx, j.ID, true); err != nil {
		t.Fatal(err)
	}
	if keep, err := d.KeepTmux(ctx, j.ID); !keep || err != nil {
		t.Errorf("KeepTmux = %v, %v; want true", keep, err)
	}
	if err := d.SetKeepTmux(ctx, "nosuchjob", true); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("SetKeepTmux of a missing job = %v, want vocab.ErrNotFound", err)
	}
	if _, err := d.KeepTmux(ctx, "nosuchjob"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("KeepTmux of a missing job = %v, want vocab.ErrNotFound", err)
	}
}
