//go:build linux || darwin

package vocab

import (
	"slices"
	"strings"
)

// SignalNames returns the canonical signal names ParseSignal accepts,
// without the SIG prefix, sorted: what a shell offers to complete.
func SignalNames() []string {
	out := make([]string, 0, len(canonicalNames))
	for _, name := range canonicalNames {
		out = append(out, strings.TrimPrefix(name, "SIG"))
	}
	slices.Sort(out)
	return out
}
