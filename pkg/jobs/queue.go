package jobs

import (
	"context"
	"fmt"
	"os"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

// Queue is a named queue of the scope with what waits and runs in it.
type Queue struct {
	// Name is the queue's name; "" is the scope's own queue, where jobs
	// wait for room under the scope's running cap or for the jobs they
	// come after (it has no parallel of its own).
	Name string `json:"name"`
	// Parallel is how many of its jobs run at once.
	Parallel int `json:"parallel"`
	// Paused queues start none of their jobs.
	Paused bool `json:"paused"`
	// Running counts its starting and running jobs, Queued its waiting
	// ones.
	Running int `json:"running"`
	Queued  int `json:"queued"`
}

// QueueUpdate changes a queue; nil fields stay as they are. A queue that
// does not exist yet is created with parallel 1, not paused.
type QueueUpdate struct {
	Parallel *int  `json:"parallel,omitempty"`
	Paused   *bool `json:"paused,omitempty"`
}

// Queues lists the scope's queues by name, with their counts.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	qs, err := c.db.Queues(ctx, c.opts.Scope)
	if err != nil {
		return nil, publicErr("", err)
	}
	out := make([]Queue, 0, len(qs))
	for _, q := range qs {
		out = append(out, fromQueue(q))
	}
	return out, nil
}

// SetQueue creates or changes the named queue of the scope and returns
// it. A parallel below 1 is ErrInvalid. The supervisor that owns the
// queue's waiting jobs sees the change within a second and starts those
// whose turn came.
func (c *Client) SetQueue(ctx context.Context, name string, u QueueUpdate) (Queue, error) {
	if err := c.check(ctx); err != nil {
		return Queue{}, err
	}
	if err := c.writable(); err != nil {
		return Queue{}, err
	}
	if err := checkText("queue name", name, MaxNameBytes); err != nil {
		return Queue{}, err
	}
	q, err := c.db.SetQueue(ctx, c.opts.Scope, name, db.QueueUpdate{Parallel: u.Parallel, Paused: u.Paused})
	if err != nil {
		return Queue{}, publicErr(name, err)
	}
	return fromQueue(q), nil
}

// MoveToFront makes the queued job ref the next of its queue to start.
// A job that is not queued is ErrInvalid.
func (c *Client) MoveToFront(ctx context.Context, ref string) (Job, error) {
	if err := c.check(ctx); err != nil {
		return Job{}, err
	}
	if err := c.writable(); err != nil {
		return Job{}, err
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return Job{}, err
	}
	if err := c.db.MoveToFront(ctx, j.ID); err != nil {
		return Job{}, publicErr(ref, err)
	}
	return c.Get(ctx, j.ID)
}

// Restart starts a new job like job ref: the same command (and shell),
// argv, directory, name, label, mode, stdin, colour, limits, exit hook and
// queue, with the environment variables it added taken again from this
// process's environment (their values were never stored; a name this
// process lacks is left out). edit, when not nil, changes the spec before
// the start: the flags a front end was given override. The old job keeps
// its history; the new one records it as RestartedFrom. A job still
// active keeps its name, so restarting it is ErrNameTaken unless the spec
// sets Replace or another name.
func (c *Client) Restart(ctx context.Context, ref string, edit func(*Spec)) (Job, error) {
	if err := c.check(ctx); err != nil {
		return Job{}, err
	}
	old, err := c.find(ctx, ref)
	if err != nil {
		return Job{}, err
	}
	spec := Spec{
		Name: old.Name, Label: old.Label, Cwd: old.Cwd, OnExit: old.OnExit,
		Timeout: orUnlimited(int64(old.Timeout), old.Timeout), TTL: orUnlimited(int64(old.TTL), old.TTL),
		MaxOutput: orUnlimited(old.MaxOutput, old.MaxOutput),
		NoStdin:   old.Stdin == vocab.StdinNull, Color: old.Color, Tmux: old.Mode == vocab.ModeTmux,
		Queue: old.Queue, Priority: old.QueuePriority,
	}
	if a := old.Argv; len(a) == 3 && a[1] == "-c" && a[2] == old.Command {
		spec.Command, spec.Shell = old.Command, a[0]
	} else {
		spec.Argv = old.Argv
	}
	for _, k := range old.EnvNames {
		if v, ok := os.LookupEnv(k); ok {
			spec.Env = append(spec.Env, k+"="+v)
		}
	}
	if edit != nil {
		edit(&spec)
	}
	spec.restartedFrom = old.ID
	return c.Start(ctx, spec)
}

// orUnlimited turns a stored 0 (none) into Unlimited for a Spec, where 0
// means the default.
func orUnlimited[T ~int64](stored int64, v T) T {
	if stored == 0 {
		return Unlimited
	}
	return v
}

// deps resolves a spec's After and AfterOK to job ids of the scope.
func (c *Client) deps(ctx context.Context, spec Spec) ([]db.Dep, error) {
	if len(spec.After) == 0 && len(spec.AfterOK) == 0 {
		return nil, nil
	}
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	var deps []db.Dep
	add := func(refs []string, ok bool) error {
		for _, ref := range refs {
			j, err := c.find(ctx, ref)
			if err != nil {
				return fmt.Errorf("start: dependency: %w", err)
			}
			deps = append(deps, db.Dep{ID: j.ID, OK: ok})
		}
		return nil
	}
	if err := add(spec.AfterOK, true); err != nil {
		return nil, err
	}
	if err := add(spec.After, false); err != nil {
		return nil, err
	}
	return deps, nil
}

// addPositions sets the queue position of the queued jobs among js (set
// is called instead for a single copy that Get returns).
func (c *Client) addPositions(ctx context.Context, js []Job, set func(int)) {
	any := false
	for _, j := range js {
		any = any || j.Status == StatusQueued
	}
	if !any || c.db == nil {
		return
	}
	pos, err := c.db.QueuePositions(ctx, c.opts.Scope)
	if err != nil {
		return // a position is a hint; the listing stands without it
	}
	for i := range js {
		if p, ok := pos[js[i].ID]; ok {
			js[i].QueuePosition = p
			if set != nil {
				set(p)
			}
		}
	}
}

func fromQueue(q db.Queue) Queue {
	return Queue{Name: q.Name, Parallel: q.Parallel, Paused: q.Paused, Running: q.Running, Queued: q.Queued}
}
