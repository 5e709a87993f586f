package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/logs"
	"github.com/agentjobs/jobs/internal/proc"
	"github.com/agentjobs/jobs/internal/vocab"
)

// fromDB turns the storage view of a job into the public one. now closes
// the runtime of a job that has not ended.
func fromDB(j db.Job, now time.Time) Job {
	out := Job{
		ID:            j.ID,
		Scope:         j.Scope,
		Name:          j.Name,
		Label:         j.Label,
		Command:       j.Command,
		Argv:          j.Argv,
		Cwd:           j.Cwd,
		EnvNames:      j.EnvNames,
		Mode:          Mode(j.Mode),
		TmuxSession:   j.TmuxSession,
		Status:        j.Status,
		ExitCode:      j.ExitCode,
		Signal:        strings.TrimPrefix(j.Signal, "SIG"),
		Reason:        j.Reason,
		Queue:         j.Queue,
		RestartedFrom: j.RestartedFrom,
		PID:           j.PID,
		PGID:          j.PGID,
		Supervisor:    j.SupervisorID,
		Stdin:         j.Stdin,
		OnExit:        j.OnExit,
		CreatedAt:     j.CreatedAt,
		StartedAt:     j.StartedAt,
		EndedAt:       j.EndedAt,
		LastAccess:    j.LastAccessAt,
		Timeout:       j.Timeout,
		TTL:           j.TTL,
		MaxOutput:     j.MaxOutput,
		OutputBytes:   j.OutputBytes,
		OutputLines:   j.OutputLines,
		EvictedBytes:  j.EvictedBytes,
		DroppedBytes:  j.DroppedBytes,
		LastOutputAt:  j.LastOutputAt,
		ReadCursor:    j.ReadCursor,
		UserCPU:       j.UserCPU,
		SysCPU:        j.SysCPU,
		MaxRSSKB:      j.MaxRSSKB,
	}
	if out.Argv == nil {
		out.Argv = []string{}
	}
	if out.Status.Terminal() && out.Stdin == vocab.StdinPipe {
		out.Stdin = vocab.StdinClosed // nothing reads it any more
	}
	out.Runtime = runtimeOf(j, now)
	return out
}

// runtimeOf prefers clocks that do not jump: the supervisor's monotonic
// measure for a finished job, the kernel's boot-time clock against the main
// process's start for a running one. The wall-clock difference of
// started_at and ended_at is the fallback (a lost job, another platform).
func runtimeOf(j db.Job, now time.Time) time.Duration {
	if j.Status.Terminal() && j.Duration > 0 {
		return j.Duration
	}
	if j.Status == vocab.StatusRunning && j.PIDStart > 0 {
		if d, ok := proc.Since(j.PIDStart); ok {
			return d
		}
	}
	if j.StartedAt == nil {
		return 0
	}
	end := now
	if j.EndedAt != nil {
		end = *j.EndedAt
	}
	return max(end.Sub(*j.StartedAt), 0)
}

func eventFromDB(e db.Event) Event {
	return Event{
		ID:     e.ID,
		JobID:  e.JobID,
		Scope:  e.Scope,
		At:     e.At,
		Kind:   e.Kind,
		From:   e.From,
		To:     e.To,
		Detail: json.RawMessage(e.Detail),
	}
}

func outputFromPage(id string, p logs.Page, text string) Output {
	o := Output{
		JobID:        id,
		Text:         text,
		Start:        p.Start,
		End:          p.End,
		NextOffset:   p.NextOffset,
		FirstLine:    p.LinesBefore + FirstLine, // the store counts from 0
		Lines:        p.Lines,
		TotalBytes:   p.TotalBytes,
		TotalLines:   p.TotalLines,
		Evicted:      p.Gap,
		EvictedTotal: p.EvictedBytes,
		DroppedTotal: p.DroppedBytes,
		CutLines:     p.CutLines,
		Truncated:    p.Truncated,
	}
	if p.Start > 0 {
		o.OmittedBefore = p.Start
	}
	if p.TotalBytes > p.End {
		o.OmittedAfter = p.TotalBytes - p.End
	}
	return o
}

// publicErr maps internal errors to the package's sentinels, naming the job
// the caller asked for.
func publicErr(ref string, err error) error {
	if err == nil {
		return nil
	}
	var amb *vocab.AmbiguousError
	var taken *vocab.NameTakenError
	var lim *vocab.LimitError
	switch {
	case errors.As(err, &amb):
		return fmt.Errorf("job prefix \"%s\" is %w: matches %s", echo(ref), ErrAmbiguous, joinIDs(amb.Candidates))
	case errors.Is(err, vocab.ErrNotFound):
		if len(ref) < db.MinPrefix && db.IsIDText(ref) {
			// Neither a name nor an id: say what would select one.
			return fmt.Errorf("job %s %w: an id prefix needs at least %d characters", echo(ref), ErrNotFound, db.MinPrefix)
		}
		return fmt.Errorf("job %s %w", echo(ref), ErrNotFound)
	case errors.As(err, &taken):
		return fmt.Errorf("%w: job %s is already running as \"%s\"", ErrNameTaken, taken.ID, echo(taken.Name))
	case errors.Is(err, vocab.ErrNameTaken):
		return fmt.Errorf("%w: %v", ErrNameTaken, err)
	case errors.As(err, &lim):
		if lim.Total {
			return fmt.Errorf("%w: %d of at most %d in all scopes", ErrLimit, lim.Running, lim.Max)
		}
		if lim.Label != "" {
			return fmt.Errorf("%w: %d of at most %d with label \"%s\" in scope \"%s\"", ErrLimit, lim.Running, lim.Max, echo(lim.Label), echo(lim.Scope))
		}
		return fmt.Errorf("%w: %d of at most %d in scope \"%s\"", ErrLimit, lim.Running, lim.Max, echo(lim.Scope))
	case errors.Is(err, vocab.ErrLimit):
		return fmt.Errorf("%w: %v", ErrLimit, err)
	case errors.Is(err, vocab.ErrInvalidTransition):
		return fmt.Errorf("%w: %v", ErrInvalidTransition, err)
	case errors.Is(err, vocab.ErrNotRunning):
		return fmt.Errorf("job %s is %w", echo(ref), ErrNotRunning)
	case errors.Is(err, vocab.ErrStdinClosed):
		return fmt.Errorf("job %s: %w", echo(ref), ErrStdinClosed)
	case errors.Is(err, vocab.ErrNotTmux):
		return fmt.Errorf("job %s is %w (start it with --tmux)", echo(ref), ErrNotTmux)
	case errors.Is(err, vocab.ErrInvalid):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	case errors.Is(err, vocab.ErrNoTmux):
		return fmt.Errorf("%w: %v", ErrNoTmux, err)
	}
	return err
}

func joinIDs(ids []string) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += id
	}
	return s
}
