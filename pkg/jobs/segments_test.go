package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestSegmentsKeepStreamsAndOffsets: Segments gives each run of output
// with its stream and offset, so that both streams can be cut at one
// offset; read piece by piece they are the output, byte for byte.
func TestSegmentsKeepStreamsAndOffsets(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "printf 'o1\\n'; sleep 0.5; printf 'e1\\n' >&2; sleep 0.5; printf 'o2'; sleep 0.5; printf 'e2\\n' >&2", NoStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	segs, o, err := c.Segments(ctx, j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	next := int64(0)
	for _, s := range segs {
		if s.Offset != next {
			t.Errorf("segment at %d, want %d (no gap in this output)", s.Offset, next)
		}
		next = s.Offset + int64(len(s.Text))
		got = append(got, string(s.Stream)+":"+s.Text)
	}
	if want := "stdout:o1\n|stderr:e1\n|stdout:o2|stderr:e2\n"; strings.Join(got, "|") != want {
		t.Errorf("segments %q, want %q", strings.Join(got, "|"), want)
	}
	if o.Start != 0 || o.End != 11 || o.TotalBytes != 11 {
		t.Errorf("range [%d, %d) of %d, want [0, 11) of 11", o.Start, o.End, o.TotalBytes)
	}
	// A range that starts and ends inside runs is cut at both ends.
	segs, _, err = c.Segments(ctx, j.ID, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].Offset != 4 || segs[0].Text != "1\n" || segs[1].Stream != jobs.Stdout || segs[1].Text != "o2" {
		t.Errorf("segments of [4, 8): %+v", segs)
	}
}

// TestMarkReadIsCompareAndSet: MarkRead moves the read cursor only from
// where it is, never back and never past the output, and ReadNew goes on
// from there.
func TestMarkReadIsCompareAndSet(t *testing.T) {
	c := open(t, jobs.Options{})
	ctx := context.Background()
	j, err := c.Start(ctx, jobs.Spec{Command: "printf 'abc\\ndef\\n'", NoStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.MarkRead(ctx, j.ID, 0, 4); !ok || err != nil {
		t.Fatalf("MarkRead 0→4 = %v, %v; want true", ok, err)
	}
	if ok, err := c.MarkRead(ctx, j.ID, 0, 5); ok || err != nil {
		t.Errorf("MarkRead from a stale 0 = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.MarkRead(ctx, j.ID, 4, 3); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("MarkRead back: %v, want ErrInvalid", err)
	}
	if _, err := c.MarkRead(ctx, j.ID, 4, 9); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("MarkRead past the output: %v, want ErrInvalid", err)
	}
	r, err := c.ReadNew(ctx, j.ID, jobs.PollOptions{Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Output.Text != "def\n" {
		t.Errorf("ReadNew after MarkRead = %q, want %q", r.Output.Text, "def\n")
	}
}
