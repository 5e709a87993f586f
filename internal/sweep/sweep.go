// Package sweep does the janitor's work that needs no supervisor: it marks
// lost the jobs of supervisors that died (Lost) and deletes what expired
// (Run). Any process may run it; `jobs gc` and every read that finds a
// dead supervisor's lock free do, as does each supervisor's janitor.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/control"
	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/protocol"
	"github.com/agentjobs/jobs/internal/tmuxjob"
	"github.com/agentjobs/jobs/internal/vocab"
)

// DefaultEventRetention is how long events are kept.
const DefaultEventRetention = 30 * 24 * time.Hour

// expiredPage is how many expired job ids the janitor reads at a time.
const expiredPage = 1000

// Result says what one pass did.
type Result struct {
	Lost          int   // jobs of dead supervisors marked lost
	Deleted       int   // finished jobs deleted after their ttl
	EventsDeleted int64 // events older than the retention deleted

	OutputDataDeleted int64 // rows of the output data file no chunk named
}

// Run runs one janitor pass over d, as `jobs gc` does: Lost, then deletes
// the finished jobs whose ttl has passed since their last access, then the events older than retention (0 means
// DefaultEventRetention). Any process may run it; it needs no supervisor.
func Run(ctx context.Context, d *db.DB, retention time.Duration) (Result, error) {
	return Pass(ctx, d, retention, nil, true)
}

// Pass is one janitor pass: Run, which also hands each job it marks lost
// to onLost (nil: nobody); with expire false it only sweeps lost jobs and
// deletes nothing.
func Pass(ctx context.Context, d *db.DB, retention time.Duration, onLost func(db.Job), expire bool) (Result, error) {
	if retention <= 0 {
		retention = DefaultEventRetention
	}
	var res Result
	var errs []error
	n, err := Lost(ctx, d, onLost)
	res.Lost = n
	if err != nil {
		errs = append(errs, err)
	}
	if expire {
		// Expired jobs go a thousand ids at a time, each deleted in short
		// transactions: a long history expiring at once must not keep the
		// supervisor from writing output and statuses meanwhile.
		now := d.Now()
		for {
			ids, err := d.ExpiredJobIDs(ctx, now, expiredPage)
			if err != nil {
				errs = append(errs, err)
				break
			}
			n, err := d.DeleteFinishedJobs(ctx, ids)
			res.Deleted += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if len(ids) < expiredPage {
				break
			}
		}
		if res.EventsDeleted, err = d.DeleteEventsBefore(ctx, d.Now().Add(-retention)); err != nil {
			errs = append(errs, err)
		}
		// The bytes in the output data file of the chunks deleted (with
		// their jobs here, or by jobs rm and jobs clear), and what a
		// crash left there.
		if res.OutputDataDeleted, err = d.SweepOutputData(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if res.Deleted > 0 || res.EventsDeleted > 0 {
		if _, err := d.ReleaseFreePages(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	return res, nil
}

// Lost marks lost the active jobs of every supervisor that died (its
// lock is free), with reason "supervisor <id> died". It records no
// supervisor's end: the next supervisor does, once it has run the hooks
// the dead one left due (see the supervisor's due hooks). It returns how many jobs it marked. Any process may
// call it; racing callers each mark a job at most once between them,
// because the transition is conditional on the current status.
//
// tmux jobs whose session still lives are skipped: their process runs in
// tmux, not under the dead supervisor, and their tmux-pipe helper records
// them (see package tmuxjob). So are those whose helper still runs: it
// closes the session of a job that ended before it records the end. A tmux
// job whose session and helper are both gone is marked lost.
//
// Each job it marks is handed to onLost (nil: nobody), which a supervisor
// uses to run its on_exit hook.
func Lost(ctx context.Context, d *db.DB, onLost func(db.Job)) (int, error) {
	sups, err := d.SupervisorsWithActiveJobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep lost jobs: %w", err)
	}
	n := 0
	var errs []error
	for _, sup := range sups {
		if protocol.SupervisorAlive(sup) {
			continue
		}
		jobs, err := d.FindJobs(ctx, db.Filter{
			AllScopes: true, SupervisorID: sup.ID,
			Statuses: []vocab.Status{vocab.StatusStarting, vocab.StatusRunning},
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, j := range jobs {
			if j.Mode == vocab.ModeTmux && tmuxjob.Alive(j) {
				continue // its tmux-pipe helper still records it, see above
			}
			lost, err := d.Transition(ctx, j.ID, LostTransition(ctx, d, j, fmt.Sprintf("supervisor %s died", sup.ID)))
			if errors.Is(err, vocab.ErrInvalidTransition) || errors.Is(err, vocab.ErrNotFound) {
				continue // finished or swept by someone else meanwhile
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n++
			if onLost != nil {
				onLost(lost)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("sweep lost jobs: %w", err)
	}
	return n, nil
}

// LostTransition is the move of an active job whose supervisor is gone to
// lost. Its processes are not killed behind the user's back (jobs kill ends
// them), so the event lists, under "survivors", the pids of those still
// alive and proven the job's: the audit trail says what was left running.
func LostTransition(ctx context.Context, d *db.DB, j db.Job, reason string) db.Transition {
	// Judged as what it is about to be: a job whose end nobody saw.
	j.Status = vocab.StatusLost
	survivors := []int{}
	t := control.Target(ctx, d, j)
	if pids, err := control.Members(t); err == nil && pids != nil {
		survivors = pids
	}
	if len(survivors) == 0 {
		_ = proc.RemoveCgroup(t.Cgroup) // nothing left in it
	}
	return db.Transition{To: vocab.StatusLost, Reason: reason, Detail: map[string]any{"survivors": survivors}}
}
