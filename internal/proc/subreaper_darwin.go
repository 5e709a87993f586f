package proc

import (
	"errors"
	"fmt"
	"syscall"
)

// SetSubreaper is not available on darwin: orphans always go to launchd,
// which reaps them.
func SetSubreaper() error {
	return fmt.Errorf("set child subreaper: %w", errors.ErrUnsupported)
}

// zombieChildren lists nothing on darwin: without a subreaper no orphan is
// ever re-parented to this process.
func zombieChildren() []Info { return nil }

func reapZombie(int, int64) (syscall.WaitStatus, bool) { return 0, false }
