//go:build linux || darwin

package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// PipeInode returns the inode number of the pipe f is one end of; both ends
// of a pipe share it. The supervisor records it for the job's stdin pipe so
// WaitingForInput can recognise that pipe in another process's fd table.
func PipeInode(f *os.File) (uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat pipe: %w", err)
	}
	if fi.Mode()&os.ModeNamedPipe == 0 {
		return 0, fmt.Errorf("stat pipe: %s is not a pipe", f.Name())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("stat pipe: no inode")
	}
	return uint64(st.Ino), nil
}
