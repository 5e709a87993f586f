package e2e

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A flood of text from a real child is stored compressed and read back
// byte-exact by every read verb, with the line numbers of the output as
// written; a flood of random bytes beside it is stored as is, in the output
// data file.
func TestCompressedCaptureByteExact(t *testing.T) {
	t.Parallel()
	const n = 24 << 20
	w := newWorld(t)
	text := w.start(append([]string{"--max-output", "0", "--no-stdin"}, helper("flood-text", strconv.Itoa(n))...)...)
	random := w.start(append([]string{"--max-output", "0", "--no-stdin"}, helper("flood", strconv.Itoa(n))...)...)
	for _, id := range []string{text, random} {
		if j := w.waitTerminal(id, 2*time.Minute); j.Status != "done" || j.OutputBytes != n {
			t.Fatalf("job %s: %s with %d bytes, want done with %d", id, j.Status, j.OutputBytes, n)
		}
	}
	want := map[string][]byte{text: make([]byte, n), random: make([]byte, n)}
	if _, err := io.ReadFull(textPattern(), want[text]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(pattern(), want[random]); err != nil {
		t.Fatal(err)
	}
	d := w.sqlDB()
	for _, c := range []struct {
		id     string
		packed bool
	}{{text, true}, {random, false}} {
		if got := w.readAll(c.id, n); !bytes.Equal(got, want[c.id]) {
			t.Fatalf("job %s: jobs log read %d bytes, not the %d written (differ at %d)", c.id, len(got), n, firstDiff(got, want[c.id]))
		}
		var packed, external, rows, stored int64
		if err := d.QueryRow(`SELECT count(*) FILTER (WHERE size IS NOT NULL AND data_ref IS NULL), count(data_ref), count(*), sum(length(data))
			FROM chunks WHERE job_id = ?`, c.id).Scan(&packed, &external, &rows, &stored); err != nil {
			t.Fatal(err)
		}
		t.Logf("job %s: %d of %d chunks compressed, %d in the output data file, %d bytes stored in the database for %d", c.id, packed, rows, external, stored, n)
		// Random bytes do not compress: their full chunks go to the
		// output data file (docs/schema.md).
		if c.packed && (packed < rows/2 || stored*4 > n || external != 0) || !c.packed && (packed != 0 || external < rows/2 || stored*4 > n) {
			t.Errorf("job %s: %d of %d chunks compressed, %d in the output data file, %d bytes stored in the database for %d", c.id, packed, rows, external, stored, n)
		}
	}
	// Lines and a search inside compressed chunks, numbered as written.
	lines := bytes.SplitAfter(want[text], []byte("\n"))
	k := len(lines) / 3
	if r := w.jobs("log", text, "--from-line", strconv.Itoa(k+1), "--lines", "2"); r.code != 0 || r.stdout != string(lines[k])+string(lines[k+1]) {
		t.Errorf("log --from-line %d --lines 2: %v; want %q", k+1, r, string(lines[k])+string(lines[k+1]))
	}
	needle := strings.TrimSuffix(string(lines[k]), "\n")
	r := w.jobs("log", text, "--grep", "^"+needle+"$")
	if r.code != 0 || !strings.Contains(r.stdout, strconv.Itoa(k+1)+":"+needle) {
		t.Errorf("log --grep for line %d: %v", k+1, r)
	}
	if r := w.jobs("log", text, "--offset", strconv.Itoa(n-500), "--limit", "500"); r.code != 0 || r.stdout != string(want[text][n-500:]) {
		t.Errorf("the last 500 bytes: %v", r)
	}
}
