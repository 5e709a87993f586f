package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// waitJob waits for the job to finish, through the client.
func waitJob(t *testing.T, c *jobs.Client, id string) jobs.Job {
	t.Helper()
	wr, err := c.Wait(t.Context(), []string{id}, jobs.WaitOptions{Timeout: 60 * time.Second})
	if err != nil || len(wr.Jobs) == 0 || !wr.Jobs[0].Status.Terminal() {
		t.Fatalf("wait %s: %v %+v", id, err, wr)
	}
	return wr.Jobs[0]
}

// TestMirrorCopiesOutput: the file holds the job's raw output past the
// threshold (none before it), is kept current while the job runs without a
// read, is emptied by clear, and goes when the job does; the metadata file
// is written whole.
func TestMirrorCopiesOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: filepath.Join(dir, "jobs.db"), Scope: "mirror"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m := newMirror(c)
	t.Cleanup(m.close)

	// Below the threshold: no file.
	small, err := c.Start(t.Context(), jobs.Spec{Command: "echo small"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, small.ID)
	st, err := m.add(t.Context(), mirrorSpec{JobID: small.ID, Path: filepath.Join(dir, "out", "small.log"), After: 100})
	if err != nil || st.Offloaded {
		t.Fatalf("small job: %+v %v, want not offloaded", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "small.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("small job's file exists: %v", err)
	}

	// A job that prints 200 lines, then waits for a line on stdin, then
	// prints more: the loop copies the first part with no read.
	j, err := c.Start(t.Context(), jobs.Spec{Command: "seq 1 200; printf 'a\\033[31mb\\r\\n'; read x; seq 201 300"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "out", "sub", j.ID+".log")
	meta := filepath.Join(dir, "out", "sub", j.ID+".meta.json")
	if _, err := m.add(t.Context(), mirrorSpec{JobID: j.ID, Path: path, After: 100, MetaPath: meta,
		Meta: func(j jobs.Job) any { return map[string]any{"id": j.ID, "status": string(j.Status)} }}); err != nil {
		t.Fatal(err)
	}
	first := seqLines(1, 200) + "a\x1b[31mb\r\n"
	waitFor(t, "the loop to copy the first part", 60*time.Second, func() bool {
		data, _ := os.ReadFile(path)
		_, err := os.Stat(meta)
		return string(data) == first && err == nil
	})
	for p, want := range map[string]os.FileMode{path: 0o600, meta: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if _, err := c.Write(t.Context(), j.ID, []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, j.ID)
	st, err = m.sync(t.Context(), j.ID)
	data, _ := os.ReadFile(path)
	if err != nil || !st.Offloaded || st.Path != path || string(data) != first+seqLines(201, 300) || st.Bytes != int64(len(data)) {
		t.Errorf("after the end: %+v %v, file %d bytes, want the whole output", st, err, len(data))
	}
	var mv map[string]string
	if raw, err := os.ReadFile(meta); err != nil || json.Unmarshal(raw, &mv) != nil || mv["status"] != "done" || mv["id"] != j.ID {
		t.Errorf("meta file: %s %v", raw, err)
	}

	// clear empties the file; remove deletes both files.
	if err := c.Clear(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := m.clear(t.Context(), j.ID); err != nil || !st.Offloaded || st.Bytes != 0 {
		t.Errorf("clear: %+v %v", st, err)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("file after clear: %q", data)
	}
	if _, err := c.Remove(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	// The loop's expiry (every 30 s) finds the job gone.
	m.expire(t.Context())
	if m.file(j.ID) != nil {
		t.Errorf("a removed job is still mirrored")
	}
	for _, p := range []string{path, meta} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the job went: %v", p, err)
		}
	}
}

// TestMirrorResumesAndRefusesLinks: a new mirror (a restarted server)
// appends to a file that holds the output's beginning, rewrites one that
// does not, and never writes through a symlink.
func TestMirrorResumesAndRefusesLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := jobs.Open(t.Context(), jobs.Options{DB: filepath.Join(dir, "jobs.db"), Scope: "mirror"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	j, err := c.Start(t.Context(), jobs.Spec{Command: "seq 1 1000"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, j.ID)
	want := seqLines(1, 1000)

	for _, tc := range []struct{ name, before string }{
		{"beginning", want[:100]},
		{"other", "something else entirely\n"},
	} {
		path := filepath.Join(dir, tc.name+".log")
		if err := os.WriteFile(path, []byte(tc.before), 0o600); err != nil {
			t.Fatal(err)
		}
		m := newMirror(c)
		st, err := m.add(context.Background(), mirrorSpec{JobID: j.ID, Path: path})
		m.close()
		data, _ := os.ReadFile(path)
		if err != nil || !st.Offloaded || string(data) != want {
			t.Errorf("%s: %+v %v; file %q…, want the whole output", tc.name, st, err, cutEnd(string(data), 40))
		}
	}

	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	m := newMirror(c)
	defer m.close()
	if _, err := m.add(context.Background(), mirrorSpec{JobID: j.ID, Path: link}); err == nil {
		t.Errorf("a symlink at the path was written through")
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("the symlink's target changed: %q", data)
	}
}

func seqLines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func itoa(i int) string {
	data, _ := json.Marshal(i)
	return string(data)
}
