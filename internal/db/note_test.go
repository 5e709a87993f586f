package db

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
)

// TestAddNoteOnceExactlyOne: of many callers adding the same note to a
// job at once, exactly one
// adds it; another note and another job are apart.
func TestAddNoteOnceExactlyOne(t *testing.T) {
	d, _ := openTest(t)
	ctx := context.Background()
	j := create(t, d, "s", "")
	other := create(t, d, "s", "")
	detail := json.RawMessage(`{"message":"completion notice delivered"}`)
	var added atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := d.AddNoteOnce(ctx, j.ID, detail)
			if err != nil {
				t.Errorf("add note: %v", err)
			}
			if ok {
				added.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := added.Load(); n != 1 {
		t.Fatalf("%d callers added the note, want 1", n)
	}
	if ok, err := d.AddNoteOnce(ctx, other.ID, detail); err != nil || !ok {
		t.Errorf("the note on another job: added %v, %v", ok, err)
	}
	if ok, err := d.AddNoteOnce(ctx, j.ID, json.RawMessage(`{"message":"something else"}`)); err != nil || !ok {
		t.Errorf("another note on the job: added %v, %v", ok, err)
	}
	if ok, err := d.AddNoteOnce(ctx, "nosuchjob0000", detail); err != nil || ok {
		t.Errorf("a note on a job that does not exist: added %v, %v", ok, err)
	}
}
