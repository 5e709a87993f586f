package privfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mark")
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	f, err := Open("mark", path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestOpenTightensOwnFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mark")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open("mark", path, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Lstat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode())
	}
}

func TestOpenRefusesSymlinkAndFIFO(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_CREATE, os.O_RDWR | os.O_CREATE | os.O_APPEND} {
		if _, err := Open("mark", link, flag); err == nil || !strings.Contains(err.Error(), "mark "+link+" is a symlink: refusing it") {
			t.Errorf("flag %#x: %v", flag, err)
		}
	}
	if err := Touch("mark", link); err == nil {
		t.Error("Touch followed a symlink")
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the symlink's target was created: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Without O_NONBLOCK this would block for ever: no reader.
	if _, err := Open("mark", fifo, os.O_WRONLY|os.O_CREATE); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
}

func TestOpenMissingWithoutCreate(t *testing.T) {
	_, err := Open("mark", filepath.Join(t.TempDir(), "none"), os.O_RDONLY)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v, want fs.ErrNotExist", err)
	}
}

func TestOpenRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to uid 65534")
	}
	path := filepath.Join(t.TempDir(), "mark")
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("mark", path, os.O_WRONLY|os.O_CREATE); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534") {
		t.Errorf("%v", err)
	}
	if fi, _ := os.Lstat(path); fi.Mode().Perm() != 0o666 {
		t.Errorf("another user's file changed mode: %v", fi.Mode())
	}
}
