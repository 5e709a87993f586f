//go:build linux || darwin

package proc

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// DefaultMinAge is the Reaper's default MinAge.
const DefaultMinAge = 500 * time.Millisecond

// Reaper reaps the orphaned descendants that a child subreaper (see
// SetSubreaper) inherits, without ever taking the exit status of a child
// that someone in this process waits for.
//
// Stealing is prevented three ways. Children whose status matters — a job's
// main process — are started with StartCmd (or registered with Own), and the
// Reaper never reaps an owned pid. StartCmd holds the same lock as the reap
// step across fork and registration, so a child that exits at once cannot be
// reaped in the gap before it is owned. Children started elsewhere in the
// process without the Reaper's knowledge (an exec.Command of the program
// that embeds the supervisor, waited for whenever that program likes) stay
// in this process's own process group, while every job and so every orphan
// a job leaves has a group of its own: the Reaper never takes a zombie of
// its own group. What remains, a child started elsewhere in the process
// with a group of its own, is protected by MinAge: its waiter usually reaps
// it within microseconds of exit, while the Reaper only takes a zombie it
// has seen unreaped for MinAge.
//
// On darwin there is no subreaper, orphans go to launchd, and the Reaper
// only keeps the owned set.
type Reaper struct {
	// MinAge is how long an unowned zombie child must have been seen
	// unreaped before the Reaper reaps it. Set it before Start.
	MinAge time.Duration
	// OnReap, if set before Start, is called (from the Reaper's goroutine)
	// with each pid reaped and its status.
	OnReap func(pid int, status syscall.WaitStatus)

	mu    sync.Mutex // guards owned and seen; held across fork+Own in StartCmd and across each reap
	owned map[int]struct{}
	seen  map[int]seenZombie

	stop chan struct{}
	done chan struct{}
}

// seenZombie remembers when an unowned zombie was first seen; start tells a
// recycled pid apart.
type seenZombie struct {
	start int64
	first time.Time
}

// NewReaper returns a Reaper with DefaultMinAge; call Start to run it.
func NewReaper() *Reaper {
	return &Reaper{
		MinAge: DefaultMinAge,
		owned:  map[int]struct{}{},
		seen:   map[int]seenZombie{},
	}
}

// Own marks pid as a child whose exit status someone waits for; the Reaper
// leaves it alone until Disown.
func (r *Reaper) Own(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned[pid] = struct{}{}
}

// Disown forgets pid. Call it after Wait for that child has returned;
// disowning a child that has not been waited for lets the Reaper take its
// status.
func (r *Reaper) Disown(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owned, pid)
}

// StartCmd starts cmd and owns its pid in one step with respect to reaping,
// so that a child that exits immediately still leaves its status for
// cmd.Wait. Call Disown(cmd.Process.Pid) after cmd.Wait returns.
func (r *Reaper) StartCmd(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.owned[cmd.Process.Pid] = struct{}{}
	return nil
}

// ErrReaperStarted is returned by Start on a Reaper that is already running.
var ErrReaperStarted = errors.New("reaper already started")

// Start runs the Reaper in a goroutine until Stop. It wakes on SIGCHLD, and
// also on a timer while a zombie waits out MinAge, and reaps at once for
// orphans inherited before Start.
func (r *Reaper) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		return ErrReaperStarted
	}
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	go r.run(sigc, r.stop, r.done)
	return nil
}

// Stop stops the Reaper's goroutine and waits for it. It is safe to call more
// than once and on a Reaper never started; Start may run it again.
func (r *Reaper) Stop() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop, r.done = nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

func (r *Reaper) run(sigc chan os.Signal, stop, done chan struct{}) {
	defer close(done)
	defer signal.Stop(sigc)
	// Coalesced SIGCHLDs are fine: each pass reaps every eligible zombie.
	// The timer only runs while a zombie is waiting out MinAge, since no
	// further SIGCHLD may come for it.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if wait := r.ReapNow(); wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-stop:
			return
		case <-sigc:
		case <-timer.C:
		}
	}
}

// ReapNow reaps, once, every zombie child that is neither owned nor younger
// than MinAge, and returns how long until the next pending zombie becomes
// eligible (0 when none is pending). Start calls it; it is exported for
// callers that want a pass at a known moment.
func (r *Reaper) ReapNow() time.Duration {
	zombies := zombieChildren()
	now := time.Now()
	var reaped []reapedChild
	var next time.Duration

	group := syscall.Getpgrp()
	r.mu.Lock()
	seen := make(map[int]seenZombie, len(zombies))
	for _, z := range zombies {
		if _, ok := r.owned[z.PID]; ok || z.PGID == group {
			continue
		}
		s, ok := r.seen[z.PID]
		if !ok || s.start != z.StartTime {
			s = seenZombie{start: z.StartTime, first: now}
		}
		if left := r.MinAge - now.Sub(s.first); left > 0 {
			seen[z.PID] = s
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		if status, ok := reapZombie(z.PID, s.start); ok {
			reaped = append(reaped, reapedChild{z.PID, status})
		}
	}
	r.seen = seen
	r.mu.Unlock()

	if r.OnReap != nil {
		for _, c := range reaped {
			r.OnReap(c.pid, c.status)
		}
	}
	return next
}

type reapedChild struct {
	pid    int
	status syscall.WaitStatus
}
