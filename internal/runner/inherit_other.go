//go:build !linux && !darwin

package runner

func closeInheritedFDs() {}
