package db

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/vocab"
)

// TestLabelLimit: Limits.PerLabel caps the active jobs of a scope with one
// label, apart from the scope's cap; other labels and other scopes are
// not counted, and a job that ended frees its place.
func TestLabelLimit(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	lim := Limits{PerScope: 10, Total: 10, PerLabel: 2}
	mk := func(scope, label string) (Job, error) {
		return d.CreateJob(ctx, NewJob{Scope: scope, Label: label, Command: "true"}, lim)
	}
	first, err := mk("s", "dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mk("s", "dev"); err != nil {
		t.Fatal(err)
	}
	_, err = mk("s", "dev")
	var le *vocab.LimitError
	if !errors.As(err, &le) || !errors.Is(err, vocab.ErrLimit) {
		t.Fatalf("third job labelled dev: %v", err)
	}
	if *le != (vocab.LimitError{Scope: "s", Label: "dev", Running: 2, Max: 2}) {
		t.Errorf("limit error %+v", *le)
	}
	if !strings.Contains(err.Error(), `2 of at most 2 with label "dev" in scope "s"`) {
		t.Errorf("message %q", err)
	}
	for _, c := range []struct{ scope, label string }{{"s", "other"}, {"s", ""}, {"t", "dev"}} {
		if _, err := mk(c.scope, c.label); err != nil {
			t.Errorf("scope %s label %q: %v", c.scope, c.label, err)
		}
	}
	move(t, d, first.ID, vocab.StatusKilled)
	if _, err := mk("s", "dev"); err != nil {
		t.Errorf("after a job labelled dev ended: %v", err)
	}
}

// TestSetLabel: a label changes on a running job, and the change is a
// note on its trail; an unknown job is ErrNotFound.
func TestSetLabel(t *testing.T) {
	t.Parallel()
	d, _ := openTest(t)
	ctx := context.Background()
	j, err := d.CreateJob(ctx, NewJob{Scope: "s", Label: "dev", Command: "true"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	move(t, d, j.ID, vocab.StatusRunning)
	if err := d.SetLabel(ctx, j.ID, "default"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.FindJobByID(ctx, j.ID); got.Label != "default" {
		t.Errorf("label %q, want default", got.Label)
	}
	evs, err := d.Events(ctx, EventFilter{Scope: "s", JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	var note map[string]string
	for _, e := range evs {
		if e.Kind == "note" {
			json.Unmarshal(e.Detail, &note)
		}
	}
	if note["from"] != "dev" || note["to"] != "default" {
		t.Errorf("note %v, want from dev to default", note)
	}
	if err := d.SetLabel(ctx, "nosuchjob", "x"); !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}
