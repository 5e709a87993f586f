package control

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/vocab"
)

// DefaultGrace is the grace period between SIGTERM and SIGKILL when none is
// configured.
const DefaultGrace = 2 * time.Second

// Grace returns the grace period a kill waits between SIGTERM and SIGKILL
// for the grace g a caller gave: def (DefaultGrace when def is 0) for 0,
// none for vocab.NoGrace. Any other negative grace is vocab.ErrInvalid.
func Grace(g, def time.Duration) (time.Duration, error) {
	switch {
	case g == vocab.NoGrace:
		return 0, nil
	case g < 0:
		return 0, fmt.Errorf("%w: negative grace %s (give 0 for the default, or none)", vocab.ErrInvalid, g)
	case g > 0:
		return g, nil
	case def > 0:
		return def, nil
	}
	return DefaultGrace, nil
}

// Plan is what a kill verb asks for, decided once for every front end.
type Plan struct {
	// End: end the job's processes (SIGTERM, Grace, SIGKILL) and record
	// it killed. Otherwise send Signal once.
	End bool
	// Grace is the grace period of an End as the caller gave it (0 the
	// default, vocab.NoGrace none); pass it on to a Kill.
	Grace time.Duration
	// Signal and SignalName are the one signal of a plan that does not
	// End.
	Signal     syscall.Signal
	SignalName string
}

// PlanKill decides what a kill with the signal sig (a name with or without
// SIG, any case, or a number; "" for none) and the grace period grace asks
// for. No signal and TERM end the job with grace; KILL ends it without
// one (SIGKILL right after SIGTERM, the job recorded killed, not failed);
// any other signal is sent once. A grace period with a signal that does
// not end the job, and an unknown signal, are vocab.ErrInvalid.
func PlanKill(sig string, grace time.Duration) (Plan, error) {
	if _, err := Grace(grace, 0); err != nil {
		return Plan{}, err
	}
	if sig == "" {
		return Plan{End: true, Grace: grace}, nil
	}
	s, err := vocab.ParseSignal(sig)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", vocab.ErrInvalid, err)
	}
	switch s {
	case syscall.SIGTERM:
		return Plan{End: true, Grace: grace}, nil
	case syscall.SIGKILL:
		return Plan{End: true, Grace: vocab.NoGrace}, nil
	}
	// The name as the kill verbs say it: INT, USR1 (34 for a real-time
	// signal).
	name := strings.TrimPrefix(vocab.SignalName(s), "SIG")
	if grace != 0 {
		return Plan{}, fmt.Errorf("%w: a grace period is for ending a job (TERM or KILL), not for %s", vocab.ErrInvalid, name)
	}
	return Plan{Signal: s, SignalName: name}, nil
}

// callerKey carries the pid of the process that asked for a kill or a
// signal, which is never signalled (see proc.Target.Exclude).
type callerKey struct{}

// WithCaller records in ctx the pid of the process a kill or signal is done
// for (a client of a supervisor's socket): it and its group are never
// signalled.
func WithCaller(ctx context.Context, pid int) context.Context {
	if pid <= 0 {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, pid)
}

// GuardCaller adds the caller recorded in ctx, and its process group, to
// what t never signals.
func GuardCaller(ctx context.Context, t *proc.Target) {
	pid, ok := ctx.Value(callerKey{}).(int)
	if !ok {
		return
	}
	t.Exclude = append(t.Exclude, pid)
	if info, err := proc.Inspect(pid); err == nil {
		t.ExcludeGroups = append(t.ExcludeGroups, info.PGID)
	}
}

// Guard adds to t what is never signalled, whatever a job's row says: the
// caller of ctx and every supervisor d records as open whose lock is held,
// with their process groups. A forged or stale row that names a
// supervisor's pid or group then reaches nothing.
func Guard(ctx context.Context, d *db.DB, t *proc.Target) {
	GuardCaller(ctx, t)
	sups, err := d.OpenSupervisors(ctx)
	if err != nil {
		return // the proof of membership still applies
	}
	for _, sup := range sups {
		// A dead supervisor's row stays open until a supervisor runs
		// the hooks it left due; its pid may be another process's by
		// now, maybe one of the job's.
		if !protocol.SupervisorAlive(sup) {
			continue
		}
		t.Exclude = append(t.Exclude, sup.PID)
		if info, err := proc.Inspect(sup.PID); err == nil {
			t.ExcludeGroups = append(t.ExcludeGroups, info.PGID)
		}
	}
}

// TargetOf names the processes of a stored job for package proc: its main
// process and group, bounded by its start, its end and its boot, and its
// JOBS_ID tag (see proc.Target for what proves a process the job's). It
// reads nothing but the row: Target adds the cgroup and the guard.
func TargetOf(j db.Job) proc.Target {
	t := proc.Target{
		PGID: j.PGID, PID: j.PID, PIDStart: j.PIDStart, BootID: j.BootID,
		EnvKey: protocol.EnvJobID, EnvValue: j.ID, NotEnvKey: protocol.EnvHookOf,
	}
	if j.Status.Terminal() {
		t.EndTicks = j.EndTicks
	}
	// A lost job's end is when its supervisor's death was noticed, not
	// when its processes ended.
	t.EndUnknown = j.Status == vocab.StatusLost
	return t
}

// Target is TargetOf with the job's cgroup (recorded with its start) and
// the guard of Guard: what every kill, signal and count of a stored job
// uses.
func Target(ctx context.Context, d *db.DB, j db.Job) proc.Target {
	t := TargetOf(j)
	t.Cgroup = CgroupOf(ctx, d, j.ID)
	Guard(ctx, d, &t)
	return t
}

// CgroupKey is the key of the running transition's detail that records the
// job's cgroup.
const CgroupKey = "cgroup"

// CgroupOf returns the cgroup recorded for job id when it started, or "".
func CgroupOf(ctx context.Context, d *db.DB, id string) string {
	events, err := d.Events(ctx, db.EventFilter{JobID: id, AllScopes: true, Limit: 4})
	if err != nil {
		return ""
	}
	for _, e := range events {
		if e.Kind != "transition" || e.To != vocab.StatusRunning {
			continue
		}
		var detail map[string]any
		if json.Unmarshal(e.Detail, &detail) != nil {
			return ""
		}
		path, _ := detail[CgroupKey].(string)
		// Only a cgroup made for this very job (see proc.NewCgroup
		// and the supervisor's jobCgroup) is taken from a record.
		if !filepath.IsAbs(path) || filepath.Clean(path) != path || filepath.Base(path) != "jobs-"+id {
			return ""
		}
		return path
	}
	return ""
}

// ForgetCgroup removes the cgroup of job id once no process is left in
// it (see proc.RemoveCgroup). The supervisor removes a job's empty cgroup
// when the job ends, and End when it has ended everything in it; a cgroup
// whose processes ended on their own later goes with the job (jobs rm) or
// at the next kill.
func ForgetCgroup(ctx context.Context, d *db.DB, id string) {
	_ = proc.RemoveCgroup(CgroupOf(ctx, d, id))
}

// End ends every process of t: SIGTERM and SIGCONT (so that a stopped
// process acts on the SIGTERM), grace, SIGKILL to whatever is left, and a
// bounded wait (proc.KillWait). It finishes its escalation even if ctx is
// cancelled meanwhile (the grace period is then cut short). The result
// has the pids signalled and surviving, never nil lists, and Escalated;
// the caller fills in the job's id and status. A cgroup left empty is
// removed.
func End(ctx context.Context, t proc.Target, grace time.Duration) (vocab.KillResult, error) {
	r, err := proc.KillTree(ctx, t, grace)
	r.Signalled, r.Survivors = nonNil(r.Signalled), nonNil(r.Survivors)
	if len(r.Survivors) == 0 && t.Cgroup != "" {
		_ = proc.RemoveCgroup(t.Cgroup)
	}
	return r, err
}

// Leftovers ends what a finished or lost job left running, as far as it is
// proven the job's: the result is AlreadyDone with the job's status and
// the pids it ended.
func Leftovers(ctx context.Context, d *db.DB, j db.Job, grace time.Duration) (vocab.KillResult, error) {
	res := vocab.KillResult{JobID: j.ID, Status: j.Status, AlreadyDone: true, Signalled: []int{}, Survivors: []int{}}
	if j.Mode == vocab.ModeTmux {
		return res, nil // its pane is gone; the tag would find what is left, but tmux jobs keep their own rules
	}
	kr, err := End(context.WithoutCancel(ctx), Target(ctx, d, j), grace)
	res.Signalled, res.Survivors, res.Escalated = kr.Signalled, kr.Survivors, kr.Escalated
	return res, err
}

// Send sends one signal to the processes of t and returns the pids
// signalled, sorted, never nil.
func Send(t proc.Target, sig syscall.Signal) ([]int, error) {
	pids, err := proc.Signal(t, sig)
	return nonNil(pids), err
}

// Members returns the pids, sorted, of the live processes proven t's.
func Members(t proc.Target) ([]int, error) { return proc.Members(t) }

// Census counts the live processes proven t's and reports whether all of
// them are stopped.
func Census(t proc.Target) (alive int, stopped bool) { return proc.Census(t) }

func nonNil(p []int) []int {
	if p == nil {
		return []int{}
	}
	return p
}

// Unanswered ends the processes of an active job whose supervisor is alive
// (its lock is held) but does not answer (stopped, hung): it records the
// intent first (db.RequestStop, killed), so that the supervisor records
// the job killed once it runs again, then ends what is proven the job's,
// as for a lost job. who names the supervisor for the result's Unreached.
func Unanswered(ctx context.Context, d *db.DB, j db.Job, grace time.Duration, who string) (vocab.KillResult, error) {
	res := vocab.KillResult{JobID: j.ID, Status: j.Status, Signalled: []int{}, Survivors: []int{},
		Unreached: who + " did not answer: the job's processes were ended directly; its status is recorded when that supervisor runs again"}
	if err := d.RequestStop(ctx, j.ID, vocab.StatusKilled); err != nil {
		return res, err
	}
	kr, err := End(context.WithoutCancel(ctx), Target(ctx, d, j), grace)
	res.Signalled, res.Survivors, res.Escalated = kr.Signalled, kr.Survivors, kr.Escalated
	if cur, ferr := d.FindJobByID(ctx, j.ID); ferr == nil {
		res.Status = cur.Status
	}
	return res, err
}
