package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestOutputIntegrity has a child write random bytes on stdout and stderr
// and checks `jobs log --all` gives both back byte for byte. The size is
// 32 MiB by default; JOBS_TEST_INTEGRITY_MIB=256 runs the full-size check.
func TestOutputIntegrity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mib := 32
	if s := os.Getenv("JOBS_TEST_INTEGRITY_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("JOBS_TEST_INTEGRITY_MIB=%q: want a positive number", s)
		}
		mib = n
	}
	if testing.Short() {
		mib = 4
	}
	src := filepath.Join(t.TempDir(), "random")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for range mib {
		rand.Read(buf)
		h.Write(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	want := h.Sum(nil)

	id := e.start("--max-output", "0", "--", "sh", "-c", `cat "$1"; cat "$1" >&2`, "sh", src)
	e.ok("wait", id)
	for _, stream := range []string{"stdout", "stderr"} {
		cmd := exec.Command(jobsBin, "log", id, "--stream", stream, "--all")
		cmd.Env = e.environ()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		written, err := io.Copy(got, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("jobs log --all --stream %s: %v", stream, err)
		}
		if written != int64(mib)<<20 || string(got.Sum(nil)) != string(want) {
			t.Errorf("%s: %d bytes back, want %d, sha256 equal: %v", stream, written, int64(mib)<<20, string(got.Sum(nil)) == string(want))
		}
	}
}
