//go:build !linux

package sigreset

import "os/exec"

// Inherited reports nothing where the kernel's view of the mask is not
// read (only Linux is).
func Inherited() (blocked, ignored uint64) { return 0, 0 }

// Wrap leaves cmd as it is: outside Linux a child keeps what the
// calling process inherited.
func Wrap(cmd *exec.Cmd) (started func() error, err error) {
	return func() error { return nil }, nil
}

func shim(fd, path string, argv []string) int { return 127 }
