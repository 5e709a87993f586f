package proc

import (
	"fmt"
	"os"
	"path/filepath"
)

// LookPath finds file in the job's PATH (not the supervisor's: a detached
// supervisor started by another caller may have a different one), relative
// entries taken from the job's cwd, like the shell would.
func LookPath(file, path, cwd string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", file)
}
