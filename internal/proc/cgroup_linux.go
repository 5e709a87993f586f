package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Cgroup is a cgroup made for one job: a directory of the cgroup v2
// hierarchy, under the cgroup of the process that made it. A process the
// job starts is put in it as it is created (clone3 with CLONE_INTO_CGROUP),
// and every process it forks stays in it whatever it does to its process
// group, session or environment (setsid, env -i): only a process allowed to
// write the cgroup's files can move itself out. So being listed in the
// cgroup's cgroup.procs proves a process the job's.
type Cgroup struct {
	// Path is the cgroup's directory.
	Path string
	// FD is the directory opened for SysProcAttr.CgroupFD; Close it once
	// the process started.
	FD int
}

// Close closes the directory descriptor.
func (c *Cgroup) Close() {
	if c != nil && c.FD >= 0 {
		syscall.Close(c.FD)
		c.FD = -1
	}
}

// NewCgroup makes the cgroup name under the calling process's own cgroup
// v2 (the unified hierarchy, also where a hybrid system mounts it beside
// the v1 ones). It fails with errors.ErrUnsupported where there is no
// cgroup v2 or its directory is not writable by the caller (most
// containers, an unprivileged user outside a delegated subtree): the job
// then runs without one.
func NewCgroup(name string) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("make cgroup %q: invalid name", name)
	}
	base, err := ownCgroupDir()
	if err != nil {
		return nil, fmt.Errorf("make cgroup: %w: %w", errors.ErrUnsupported, err)
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("make cgroup: %w: %w", errors.ErrUnsupported, err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	return &Cgroup{Path: dir, FD: fd}, nil
}

// RemoveCgroup removes the cgroup at path once no process is left in it.
// A cgroup that still has processes stays (EBUSY) and is not an error, nor
// is one that is already gone.
func RemoveCgroup(path string) error {
	if path == "" {
		return nil
	}
	err := syscall.Rmdir(path)
	if err == nil || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EBUSY) {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", path, err)
}

// cgroup2Magic is the cgroup2 file system's f_type (CGROUP2_SUPER_MAGIC).
const cgroup2Magic = 0x63677270

// JobCgroups returns the names of the cgroups beneath the calling
// process's own whose names start with prefix, or none where there is no
// cgroup v2.
func JobCgroups(prefix string) (dir string, names []string) {
	base, err := ownCgroupDir()
	if err != nil {
		return "", nil
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return "", nil
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return base, names
}

// CgroupProcs lists the processes in the cgroup at path (its cgroup.procs).
// A cgroup that is gone lists none. A path that is not a directory of the
// cgroup2 file system (a forged record naming a directory with a file of
// pids in it) is an error: nothing there proves anything.
func CgroupProcs(path string) ([]int, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); errors.Is(err, syscall.ENOENT) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", path, err)
	}
	if fs.Type != cgroup2Magic {
		return nil, fmt.Errorf("list cgroup %s: not a cgroup2 directory", path)
	}
	b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", path, err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// ownCgroupDir returns the directory of the calling process's cgroup in the
// cgroup v2 hierarchy: its "0::" line of /proc/self/cgroup under the mount
// point of the cgroup2 file system.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile(procRoot + "/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 membership")
	}
	mount, err := cgroup2MountCached()
	if err != nil {
		return "", err
	}
	// A process in a cgroup outside the mount's view (another
	// namespace) reads a path starting with "/..": not one we can use.
	if strings.Contains(rel, "..") {
		return "", fmt.Errorf("own cgroup %q is outside the mounted hierarchy", rel)
	}
	return filepath.Join(mount, rel), nil
}

// lastCgroup2Mount is where cgroup2MountCached last found the cgroup2
// file system.
var lastCgroup2Mount atomic.Pointer[string]

// cgroup2MountCached is cgroup2Mount without reading the mount table each
// time: a supervisor makes a cgroup for every job it starts, and reading
// and splitting /proc/self/mountinfo was most of that work. The path found
// last is taken again while it is still the root of a cgroup2 file system
// (statfs; the mount table is read again otherwise).
func cgroup2MountCached() (string, error) {
	if p := lastCgroup2Mount.Load(); p != nil {
		var fs syscall.Statfs_t
		if syscall.Statfs(*p, &fs) == nil && fs.Type == cgroup2Magic {
			return *p, nil
		}
	}
	mount, err := cgroup2Mount()
	if err != nil {
		lastCgroup2Mount.Store(nil)
		return "", err
	}
	lastCgroup2Mount.Store(&mount)
	return mount, nil
}

// cgroup2Mount returns where the cgroup2 file system is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open(procRoot + "/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 && fields[3] == "/" {
				return unescapeMount(fields[4]), nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup2 file system mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
