// Command pipefile is the benchmark's file-writing peer: it runs a command
// with its stdout and stderr on one pipe and copies that pipe into a file,
// a read(2) and a write(2) of up to 64 KiB at a time, as job runners that
// keep output in files (task-spooler, pueue) store it. The harness times
// it beside jobs capturing the same output into SQLite.
//
//	pipefile OUT CMD [ARG…]
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: pipefile OUT CMD [ARG…]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3:]); err != nil {
		fmt.Fprintln(os.Stderr, "pipefile:", err)
		os.Exit(1)
	}
}

func run(out, name string, args []string) error {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	w.Close()
	// Neither io.Copy nor File.ReadFrom: those splice a pipe into a file
	// without copying it through the program, which a runner that looks
	// at its output (counts lines, timestamps it) does not do.
	buf := make([]byte, 64<<10)
	var copyErr error
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := f.Write(buf[:n]); werr != nil {
				copyErr = werr
				break
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			copyErr = err
			break
		}
	}
	r.Close()
	waitErr := cmd.Wait()
	if err := f.Close(); err != nil && copyErr == nil {
		copyErr = err
	}
	if copyErr != nil {
		return copyErr
	}
	return waitErr
}
