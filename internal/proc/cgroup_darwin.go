package proc

import "errors"

// Cgroup is a cgroup made for one job; darwin has none.
type Cgroup struct {
	Path string
	FD   int
}

// Close does nothing on darwin.
func (c *Cgroup) Close() {}

// NewCgroup fails on darwin: there are no cgroups.
func NewCgroup(string) (*Cgroup, error) { return nil, errors.ErrUnsupported }

// RemoveCgroup does nothing on darwin.
func RemoveCgroup(string) error { return nil }

// CgroupProcs lists nothing on darwin.
func CgroupProcs(string) ([]int, error) { return nil, nil }

// JobCgroups finds none on darwin.
func JobCgroups(string) (string, []string) { return "", nil }
