package startstop

import (
	"context"
	"errors"
	"slices"
	"testing"
)

type recorder struct {
	Base
	name  string
	log   *[]string
	fail  bool
	ended chan struct{}
}

func (r *recorder) Start(ctx context.Context) error {
	if r.fail {
		return errors.New("refused")
	}
	r.Init(ctx)
	*r.log = append(*r.log, "start "+r.name)
	r.ended = make(chan struct{})
	r.Go(func(ctx context.Context) {
		<-ctx.Done()
		close(r.ended)
	})
	return nil
}

func (r *recorder) Stop() error {
	r.Halt()
	if r.ended != nil {
		<-r.ended // closed before Base.Stop returned
	}
	*r.log = append(*r.log, "stop "+r.name)
	return nil
}

func TestStartInOrderStopInReverse(t *testing.T) {
	var log []string
	a, b, c := &recorder{name: "a", log: &log}, &recorder{name: "b", log: &log}, &recorder{name: "c", log: &log}
	if err := StartAll(context.Background(), a, b, c); err != nil {
		t.Fatal(err)
	}
	StopAll(a, b, c)
	StopAll(a, b, c) // a second stop is tolerated
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("log = %q, want %q", log, want)
	}
}

func TestStartAllStopsAtFailure(t *testing.T) {
	var log []string
	a, b, c := &recorder{name: "a", log: &log}, &recorder{name: "b", log: &log, fail: true}, &recorder{name: "c", log: &log}
	if err := StartAll(context.Background(), a, b, c); err == nil {
		t.Fatal("StartAll succeeded with a failing service")
	}
	StopAll(a, b, c)
	want := []string{"start a", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("log = %q, want %q", log, want)
	}
}

func TestServiceContextOutlivesStartContext(t *testing.T) {
	var b Base
	ctx, cancel := context.WithCancel(context.Background())
	b.Init(ctx)
	cancel()
	if err := b.Context().Err(); err != nil {
		t.Fatalf("service context ended with its Start context: %v", err)
	}
	b.Halt()
	if b.Context().Err() == nil {
		t.Fatal("service context not ended by Halt")
	}
	if b.Go(func(context.Context) {}) {
		t.Fatal("Go ran a goroutine after Halt")
	}
}
