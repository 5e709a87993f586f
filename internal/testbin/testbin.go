// Package testbin gives a test main the jobs binary its tests run. Each
// package's tests get their own path to it, so that a test main ending
// "the supervisors of its binary" (matched by path) never ends another
// package's: the binary at $JOBS_TEST_BINARY, built once by
// scripts/test.sh, is hard-linked (or copied) into the package's
// directory; without it, the binary is built there.
package testbin

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Env names an already built jobs binary to use instead of building one.
const Env = "JOBS_TEST_BINARY"

// Jobs puts the jobs binary at dir/jobs and returns that path.
func Jobs(dir string) (string, error) {
	dst := filepath.Join(dir, "jobs")
	src := os.Getenv(Env)
	if src == "" {
		// As the README builds it (and scripts/test.sh).
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", dst, "github.com/agentjobs/jobs")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build github.com/agentjobs/jobs: %v\n%s", err, out)
		}
		return dst, nil
	}
	if err := os.Link(src, dst); err == nil {
		return dst, nil
	}
	if err := copyFile(src, dst); err != nil {
		return "", fmt.Errorf("%s=%s: %w", Env, src, err)
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
