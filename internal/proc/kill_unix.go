//go:build linux || darwin

package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// KillWait bounds how long KillTree waits for processes to disappear after
// SIGKILL. A process stuck in uninterruptible sleep (a dead NFS server) can
// outlive SIGKILL indefinitely; it is reported as a survivor instead of
// hanging the caller.
const KillWait = 2 * time.Second

// pollInterval is how often KillTree looks at /proc while it waits. The wait
// is bounded by the grace period, so polling costs little and needs no
// cooperation (no SIGCHLD, no pidfd per process).
const pollInterval = 15 * time.Millisecond

// KillTree ends every process of t: it sends SIGTERM and then SIGCONT (so a
// stopped process wakes up and acts on the SIGTERM) to the process group and
// to every tagged process, waits until all are gone or grace has passed,
// sends SIGKILL to whatever is left (the group as a whole too, which also
// catches processes forked meanwhile), and waits at most KillWait more.
//
// Each pid is checked against its start time right before each signal, and
// the caller's own pid and process group and t.Exclude are never signalled.
// Calling KillTree when nothing of the job runs does nothing and returns a
// zero vocab.KillResult. Cancelling ctx cuts the grace period short (survivors get
// SIGKILL at once). The wait after SIGKILL does not heed ctx: it is short
// (SIGKILL takes effect at once unless a process is stuck in the kernel) and
// bounded by KillWait, and cutting it would report processes that are
// already dying as survivors.
func KillTree(ctx context.Context, t Target, grace time.Duration) (vocab.KillResult, error) {
	var res vocab.KillResult
	signalled := map[int]bool{}
	var errs []error
	seenErr := map[string]bool{}
	send := func(live map[int]Info, groupOK bool, sig syscall.Signal) {
		pids, err := sendSignal(t, live, groupOK, sig)
		for _, p := range pids {
			signalled[p] = true
		}
		// SIGKILL is repeated every poll; a process we may not signal
		// (EPERM) would otherwise repeat its error a hundred times.
		if err != nil && !seenErr[err.Error()] {
			seenErr[err.Error()] = true
			errs = append(errs, err)
		}
	}
	finish := func(left map[int]Info, err error) (vocab.KillResult, error) {
		res.Signalled = sortedKeys(signalled)
		res.Survivors = sortedKeys(left)
		if err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return res, fmt.Errorf("kill process tree: %w", err)
		}
		return res, nil
	}

	live, groupOK, err := jobProcs(t)
	if err != nil {
		return res, fmt.Errorf("kill process tree: %w", err)
	}
	if len(live) == 0 {
		return res, nil
	}
	send(live, groupOK, syscall.SIGTERM)
	send(live, groupOK, syscall.SIGCONT)

	live, groupOK, err = waitGone(ctx, t, grace, nil)
	if err != nil {
		return finish(live, err)
	}
	if len(live) == 0 {
		return finish(nil, nil)
	}
	res.Escalated = true
	send(live, groupOK, syscall.SIGKILL)
	// Keep sending SIGKILL to whatever still shows up: a process forked
	// between the scan and the group signal, or one that setsid'd away.
	live, _, err = waitGone(context.WithoutCancel(ctx), t, KillWait, func(live map[int]Info, groupOK bool) {
		send(live, groupOK, syscall.SIGKILL)
	})
	return finish(live, err)
}

// Signal sends one signal to the processes of t: once to the process group
// (unless the caller is in it or an excluded pid is) and once to each tagged
// process outside it, checking start times first. It returns the pids that
// were signalled, sorted; none when nothing of the job runs.
func Signal(t Target, sig syscall.Signal) ([]int, error) {
	live, groupOK, err := jobProcs(t)
	if err != nil {
		return nil, fmt.Errorf("signal processes: %w", err)
	}
	pids, err := sendSignal(t, live, groupOK, sig)
	slices.Sort(pids)
	if err != nil {
		return pids, fmt.Errorf("signal processes: %w", err)
	}
	return pids, nil
}

// Members returns the pids, sorted, of the live processes proven to be t's
// that could be signalled (see Target).
func Members(t Target) ([]int, error) {
	live, _, err := jobProcs(t)
	if err != nil {
		return nil, fmt.Errorf("list processes of job: %w", err)
	}
	return sortedKeys(live), nil
}

// Census counts the live processes proven to be t's and reports whether
// all of them are stopped (state T: SIGSTOP, or a terminal's stop
// signals); stopped is false when none is alive or they cannot be listed.
func Census(t Target) (alive int, stopped bool) {
	live, _, err := jobProcs(t)
	if err != nil {
		return 0, false
	}
	stopped = len(live) > 0
	for _, info := range live {
		stopped = stopped && info.State == 'T'
	}
	return len(live), stopped
}

// ThisBoot reports whether t was recorded in the current boot, or its boot
// is not known.
func (t Target) ThisBoot() bool { return t.BootID == "" || t.BootID == BootID() }

// CountAlive returns how many processes of t are alive: group members,
// tagged processes and the main process, zombies not counted. It returns 0
// when the processes cannot be listed.
func CountAlive(t Target) int {
	live, _, err := jobProcs(t)
	if err != nil {
		return 0
	}
	return len(live)
}

// jobProcs returns the live processes proven to be t's (see Target) that
// may be signalled, and whether the process group may be signalled as a
// whole: every live member of it must be proven and signallable, and the
// group must not be the caller's or excluded.
func jobProcs(t Target) (map[int]Info, bool, error) {
	if !t.ThisBoot() {
		return nil, false, nil // another boot: its pids name strangers now
	}
	self := os.Getpid()
	selfGroup := syscall.Getpgrp()
	excluded := func(info Info) bool {
		return info.PID <= 1 || info.PID == self || slices.Contains(t.Exclude, info.PID) ||
			info.PGID == selfGroup || slices.Contains(t.ExcludeGroups, info.PGID)
	}
	hasGroup := t.PGID > 1 && t.PIDStart != 0
	inGroup := func(info Info) bool { return hasGroup && info.PGID == t.PGID }

	found, tagged, err := scanSince(inGroup, t.EnvKey, t.EnvValue, t.PIDStart, t.NotEnvKey)
	if err != nil {
		return nil, false, err
	}
	if t.Cgroup != "" {
		// Every process in the job's own cgroup is the job's: it was
		// forked there and cannot leave on its own.
		// A cgroup that cannot be read (or is no cgroup) proves
		// nothing; the other proofs still hold.
		members, _ := CgroupProcs(t.Cgroup)
		seen := make(map[int]bool, len(found))
		for _, info := range found {
			seen[info.PID] = true
		}
		for _, pid := range members {
			if tagged == nil {
				tagged = map[int]bool{}
			}
			if seen[pid] {
				tagged[pid] = true
				continue
			}
			if info, err := Inspect(pid); err == nil {
				tagged[pid] = true
				found = append(found, info)
			}
		}
	}
	isMain := func(info Info) bool {
		return t.PID > 1 && t.PIDStart != 0 && info.PID == t.PID && info.StartTime == t.PIDStart
	}
	mainSeen := false
	for _, info := range found {
		mainSeen = mainSeen || isMain(info)
		// A group is named by its leader's pid and lives as long as any
		// member does. A leader that is not the job's main process
		// means the id was reused: no member is the job's for being
		// in it.
		if hasGroup && t.PGID == t.PID && info.PID == t.PGID && info.StartTime != t.PIDStart {
			hasGroup = false
		}
	}
	if !mainSeen && t.PID > 1 && t.PIDStart != 0 {
		if info, err := Inspect(t.PID); err == nil && isMain(info) {
			found = append(found, info)
			mainSeen = true
		}
	}
	if t.EndUnknown && !mainSeen {
		// A lost job whose main process is gone: its group may have
		// emptied and its id been taken by strangers before the job was
		// marked lost, within the bounds of its recorded life. Only the
		// tag and the cgroup still prove a process the job's.
		hasGroup = false
	}
	inLife := func(info Info) bool {
		return info.StartTime >= t.PIDStart && (t.EndTicks == 0 || info.StartTime <= t.EndTicks)
	}

	groupOK := hasGroup && t.PGID != selfGroup && !slices.Contains(t.ExcludeGroups, t.PGID)
	live := make(map[int]Info, len(found))
	for _, info := range found {
		member := inGroup(info)
		proven := tagged[info.PID] || isMain(info) || (member && inLife(info))
		if member && !info.Dead() && (!proven || excluded(info)) {
			groupOK = false // the group signal would reach it
		}
		if !proven || info.Dead() || excluded(info) {
			continue
		}
		live[info.PID] = info
	}
	hasMember := false
	for _, info := range live {
		hasMember = hasMember || inGroup(info)
	}
	return live, groupOK && hasMember, nil
}

// sendSignal sends sig to the group (when groupOK) and to every process in
// live that the group signal does not reach, and returns who got it.
func sendSignal(t Target, live map[int]Info, groupOK bool, sig syscall.Signal) ([]int, error) {
	var (
		pids []int
		errs []error
	)
	if groupOK {
		// The group id stays taken while any member, even a zombie,
		// exists, and jobProcs just saw a live one; so this cannot hit
		// a recycled group.
		err := syscall.Kill(-t.PGID, sig)
		switch {
		case err == nil:
			for pid, info := range live {
				if info.PGID == t.PGID {
					pids = append(pids, pid)
				}
			}
		case !errors.Is(err, syscall.ESRCH):
			errs = append(errs, fmt.Errorf("signal group %d: %w", t.PGID, err))
		}
	}
	for pid, info := range live {
		if groupOK && info.PGID == t.PGID {
			continue
		}
		ok, err := signalProcess(pid, info.StartTime, sig)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	return pids, errors.Join(errs...)
}

// waitGone polls until no process of t is alive, d has passed or ctx is
// done, calling each (if set) with what it finds alive on every round. It
// returns what is still alive at the end.
func waitGone(ctx context.Context, t Target, d time.Duration, each func(map[int]Info, bool)) (map[int]Info, bool, error) {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		live, groupOK, err := jobProcs(t)
		if err != nil || len(live) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			return live, groupOK, err
		}
		if each != nil {
			each(live, groupOK)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// checkedKill sends sig to pid after checking its start time. It is the
// fallback where pidfds are missing.
func checkedKill(pid int, start int64, sig syscall.Signal) (bool, error) {
	if !Alive(pid, start) {
		return false, nil
	}
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("signal process %d: %w", pid, err)
	}
	return true, nil
}

func sortedKeys[V any](m map[int]V) []int {
	if len(m) == 0 {
		return nil
	}
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
