package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// rangeFuzzOutput is what the fuzzed job prints: lines of different
// lengths, multi-byte UTF-8, a NUL, invalid UTF-8, a line without newline.
const rangeFuzzOutput = "alpha\nβeta γ\n\x00nul\n\xff\xfe bad\n\n" + "a long line " + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + "\nlast without newline"

// FuzzLogRange reads one job's output with random ranges (byte range, line
// range, tail in characters or lines, stream, grep): Log must never panic,
// must refuse negative numbers and bad regular expressions with ErrInvalid,
// and a byte range, line range or tail read without filters must return
// exactly the bytes it says it covers.
func FuzzLogRange(f *testing.F) {
	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{DB: filepath.Join(f.TempDir(), "jobs.db"), Scope: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	src := filepath.Join(f.TempDir(), "output")
	if err := os.WriteFile(src, []byte(rangeFuzzOutput), 0o600); err != nil {
		f.Fatal(err)
	}
	j, err := c.Start(ctx, jobs.Spec{Argv: []string{"cat", src}, NoStdin: true})
	if err != nil {
		f.Fatal(err)
	}
	res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{})
	if err != nil {
		f.Fatal(err)
	}
	if got := res.Jobs[0]; got.Status != jobs.StatusDone || got.OutputBytes != int64(len(rangeFuzzOutput)) {
		f.Fatalf("the job that prints the output: %s, %d bytes (%s)", got.Status, got.OutputBytes, got.Reason)
	}
	want := []byte(rangeFuzzOutput)
	f.Add(int64(0), int64(10), int64(0), int64(0), int64(0), int64(0), uint8(0), "")
	f.Add(int64(5), int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0), "")
	f.Add(int64(0), int64(0), int64(2), int64(3), int64(0), int64(0), uint8(0), "")
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(7), int64(0), uint8(0), "")
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(2), uint8(1), "a")
	f.Add(int64(-1), int64(3), int64(0), int64(0), int64(0), int64(0), uint8(0), "(")
	f.Add(int64(1<<62), int64(1<<62), int64(0), int64(0), int64(0), int64(0), uint8(2), "")
	f.Fuzz(func(t *testing.T, offset, limit, fromLine, lines, tail, tailLines int64, stream uint8, grep string) {
		r := jobs.Range{Offset: offset, Limit: limit, FromLine: fromLine, Lines: lines, Tail: tail, TailLines: tailLines, Grep: grep}
		switch stream % 3 {
		case 1:
			r.Stream = jobs.Stdout
		case 2:
			r.Stream = jobs.Stderr
		}
		out, err := c.Log(ctx, j.ID, r)
		if err != nil {
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Log(%+v): %v, want ErrInvalid or success", r, err)
			}
			return
		}
		if out.Start < 0 || out.End < out.Start || out.End > int64(len(want)) || out.TotalBytes != int64(len(want)) {
			t.Fatalf("Log(%+v) covers [%d, %d) of %d (total %d)", r, out.Start, out.End, len(want), out.TotalBytes)
		}
		if grep != "" || r.Stream == jobs.Stderr {
			return // filtered: covered bytes are not all returned
		}
		switch {
		case offset > 0 || limit > 0:
			lo := min(offset, int64(len(want)))
			if out.Start != lo || out.Text != string(want[out.Start:out.End]) || out.NextOffset != out.End {
				t.Fatalf("Log(%+v) = [%d, %d) %q next %d; want start %d and the bytes it covers", r, out.Start, out.End, out.Text, out.NextOffset, lo)
			}
			if limit > 0 && out.End-out.Start > limit {
				t.Fatalf("Log(%+v) returned %d bytes, more than the limit", r, out.End-out.Start)
			}
		case fromLine > 0 || lines > 0:
			all := strings.SplitAfter(rangeFuzzOutput, "\n")
			first := max(fromLine, 1) - 1
			if first >= int64(len(all)) {
				if out.Text != "" {
					t.Fatalf("Log(%+v) past the last line = %q", r, out.Text)
				}
				return
			}
			n := lines
			if n == 0 {
				n = 200
			}
			wantText := strings.Join(all[first:min(first+n, int64(len(all)))], "")
			if out.Text != wantText {
				t.Fatalf("Log(%+v) = %q, want %q", r, out.Text, wantText)
			}
		default:
			if !bytes.HasSuffix(want, []byte(out.Text)) || out.End != int64(len(want)) {
				t.Fatalf("Log(%+v) tail = %q (end %d), not a suffix of the output", r, out.Text, out.End)
			}
		}
	})
}
