package supervisor

import (
	"sync"

	"github.com/agentjobs/jobs/internal/proc"
)

// Being a child subreaper is a property of the process, and a second
// reaper would not know the first one's owned children, so all the
// supervisors of one process share one Reaper, started by the first Open
// and stopped by the last Close.
var shared struct {
	mu     sync.Mutex
	users  int
	reaper *proc.Reaper
}

// acquireReaper makes the process a child subreaper (where the system has
// them) and returns the shared Reaper, starting it for the first user.
// Orphaned descendants of our jobs are then re-parented to us instead of to
// PID 1, which on some machines never reaps them, and the Reaper reaps
// them; a killed grandchild does not linger as a zombie.
func acquireReaper(logf func(string, ...any)) *proc.Reaper {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.users++
	if shared.reaper == nil {
		if err := proc.SetSubreaper(); err != nil {
			logf("become child subreaper: %v", err)
		}
		shared.reaper = proc.NewReaper()
		if err := shared.reaper.Start(); err != nil {
			logf("start reaper: %v", err)
		}
	}
	return shared.reaper
}

// releaseReaper stops the shared Reaper when its last user goes. The
// process stays a subreaper: that cannot be undone safely while
// descendants may still be re-parented.
func releaseReaper() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.users--
	if shared.users == 0 && shared.reaper != nil {
		shared.reaper.Stop()
		shared.reaper = nil
	}
}
