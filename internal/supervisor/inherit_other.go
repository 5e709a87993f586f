//go:build !linux && !darwin

package supervisor

func closeInheritedFDs() {}
