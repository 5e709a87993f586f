package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
	"github.com/jmoiron/sqlx"
)

// Job is one job as the rest of the program sees it.
type Job struct {
	ID      string
	Scope   string
	Name    string // "" when the job has no name
	Label   string
	Command string   // as the user gave it, for display
	Argv    []string // what was executed
	Cwd     string

	// EnvNames are the names of the environment variables the job added.
	// Their values are never stored.
	EnvNames []string

	Mode        string // "pipe", "tmux" or "pty"
	TmuxSession string
	// TmuxSocket is the tmux server of a tmux job (JOBS_TMUX_SOCKET when
	// it started; "" is tmux's default); TmuxSocketSet is false for jobs
	// recorded before it was kept.
	TmuxSocket    string
	TmuxSocketSet bool

	Status   vocab.Status
	ExitCode *int   // nil until the job ends with an exit status
	Signal   string // signal name when the main process died of one
	Reason   string // why it failed to start, was killed or lost

	PID, PGID int
	PIDStart  int64 // start time of the main process, clock ticks since boot
	// BootID is the boot the job ran in; "" when not recorded.
	BootID string
	// EndTicks is when the job ended on the clock of PIDStart; 0 while it
	// runs or when not recorded.
	EndTicks int64

	SupervisorID string
	Stdin        string // "pipe", "closed" or "null"
	Color        bool
	OnExit       string

	CreatedAt    time.Time
	StartedAt    *time.Time
	EndedAt      *time.Time
	LastAccessAt time.Time

	Timeout   time.Duration // 0 = none
	TTL       time.Duration // 0 = kept forever
	MaxOutput int64         // bytes retained; 0 = no cap

	OutputBytes  int64 // bytes produced: the absolute end offset
	OutputLines  int64
	EvictedBytes int64 // removed from the middle by the output cap
	DroppedBytes int64 // the database could not take them
	LastOutputAt *time.Time
	ReadCursor   int64

	UserCPU, SysCPU time.Duration
	MaxRSSKB        int64
	// Duration is how long the finished job ran by the supervisor's
	// monotonic clock; 0 when not recorded (still running, or lost).
	Duration time.Duration
	// SurvivorsGone is set once a reader saw no process of the finished
	// job alive (see MarkSurvivorsGone).
	SurvivorsGone bool

	// Queue is the named queue the job waited in; "" when none (a job
	// queued for the scope's running cap or its dependencies only).
	Queue string
	// QueuePriority orders a queue, higher first.
	QueuePriority int
	// RestartedFrom is the job this one repeats (jobs restart); "" when
	// none.
	RestartedFrom string
}

// NewJob is what CreateJob needs to create a job. Empty Mode and Stdin mean
// "pipe"; an empty ID is filled with NewID.
type NewJob struct {
	ID, Scope, Name, Label, Command string
	Argv                            []string
	Cwd                             string
	EnvNames                        []string
	Mode, TmuxSession               string
	TmuxSocket                      string // tmux jobs: the server's socket, "" for the default
	SupervisorID                    string
	Stdin                           string
	Color                           bool
	OnExit                          string
	Timeout, TTL                    time.Duration
	MaxOutput                       int64

	// Queue, when set, makes the job wait in status queued in this named
	// queue of its scope (created with parallel 1 when new).
	Queue string
	// Priority orders the job in its queue, higher first.
	Priority int
	// After lists the jobs this one waits for; a job with any waits in
	// status queued.
	After []Dep
	// QueueOnLimit makes a start that would pass the scope's (or the
	// total) running cap wait in status queued instead of failing with a
	// *vocab.LimitError.
	QueueOnLimit bool
	// RestartedFrom is the job this one repeats.
	RestartedFrom string
}

// Dep is one job a queued job waits for.
type Dep struct {
	ID string // the job's id
	// OK makes the wait succeed only when the job ends done; otherwise the
	// waiting job fails with the reason "dependency ID failed".
	OK bool
}

// Limits caps the number of active (starting or running) jobs. Zero means
// unlimited.
type Limits struct {
	PerScope int
	Total    int
	// PerLabel caps the active jobs of the scope that carry the new
	// job's label (a group inside a scope, such as a profile's session);
	// zero means none.
	PerLabel int
}

// Filter selects jobs for FindJobs. Zero fields do not filter, except Scope,
// which always applies unless AllScopes is set.
type Filter struct {
	Scope        string
	AllScopes    bool
	Statuses     []vocab.Status
	SupervisorID string
	Name         string // exactly this name
	// CreatedSince keeps the jobs created at or after it.
	CreatedSince time.Time
	// NameContains, LabelContains and CommandContains keep the jobs whose
	// name, label or command contains the text (LIKE, so ASCII letters
	// match either case; % and _ are matched as themselves).
	NameContains, LabelContains, CommandContains string
	// After continues a listing: only jobs older than this position.
	After *Position
	Limit int // 0 = no limit
}

// Position is a job's place in a listing, newest first: its creation time
// and rowid. A listing continues after the last job it returned.
type Position struct {
	CreatedAt string // as stored
	Rowid     int64
}

// jobColumns lists the jobs columns in jobRow order.
const jobColumns = `id, scope, name, label, command, argv, cwd, env_names, mode, tmux_session,
	status, exit_code, signal, reason, pid, pgid, pid_start, supervisor_id, stdin, color, on_exit,
	created_at, started_at, ended_at, last_access_at, timeout_ms, ttl_ms, max_output,
	output_bytes, output_lines, evicted_bytes, dropped_bytes, last_output_at, read_cursor,
	user_cpu_ms, sys_cpu_ms, max_rss_kb, duration_ms, survivors_gone, boot_id, end_ticks, tmux_socket,
	queue, queue_priority, restarted_from`

// jobRow is a jobs row as stored.
type jobRow struct {
	ID            string         `db:"id"`
	Scope         string         `db:"scope"`
	Name          sql.NullString `db:"name"`
	Label         string         `db:"label"`
	Command       string         `db:"command"`
	Argv          string         `db:"argv"`
	Cwd           string         `db:"cwd"`
	EnvNames      string         `db:"env_names"`
	Mode          string         `db:"mode"`
	TmuxSession   sql.NullString `db:"tmux_session"`
	Status        string         `db:"status"`
	ExitCode      sql.NullInt64  `db:"exit_code"`
	Signal        sql.NullString `db:"signal"`
	Reason        sql.NullString `db:"reason"`
	PID           sql.NullInt64  `db:"pid"`
	PGID          sql.NullInt64  `db:"pgid"`
	PIDStart      sql.NullInt64  `db:"pid_start"`
	SupervisorID  sql.NullString `db:"supervisor_id"`
	Stdin         string         `db:"stdin"`
	Color         bool           `db:"color"`
	OnExit        string         `db:"on_exit"`
	CreatedAt     string         `db:"created_at"`
	StartedAt     sql.NullString `db:"started_at"`
	EndedAt       sql.NullString `db:"ended_at"`
	LastAccessAt  string         `db:"last_access_at"`
	TimeoutMS     int64          `db:"timeout_ms"`
	TTLMS         int64          `db:"ttl_ms"`
	MaxOutput     int64          `db:"max_output"`
	OutputBytes   int64          `db:"output_bytes"`
	OutputLines   int64          `db:"output_lines"`
	EvictedBytes  int64          `db:"evicted_bytes"`
	DroppedBytes  int64          `db:"dropped_bytes"`
	LastOutputAt  sql.NullString `db:"last_output_at"`
	ReadCursor    int64          `db:"read_cursor"`
	UserCPUMS     sql.NullInt64  `db:"user_cpu_ms"`
	SysCPUMS      sql.NullInt64  `db:"sys_cpu_ms"`
	MaxRSSKB      sql.NullInt64  `db:"max_rss_kb"`
	DurationMS    sql.NullInt64  `db:"duration_ms"`
	SurvivorsGone bool           `db:"survivors_gone"`
	BootID        sql.NullString `db:"boot_id"`
	TmuxSocket    sql.NullString `db:"tmux_socket"`
	EndTicks      sql.NullInt64  `db:"end_ticks"`
	Queue         sql.NullString `db:"queue"`
	QueuePriority int            `db:"queue_priority"`
	RestartedFrom sql.NullString `db:"restarted_from"`
}

// job converts a stored row to a Job.
func (r *jobRow) job() (Job, error) {
	j := Job{
		ID:            r.ID,
		Scope:         r.Scope,
		Name:          r.Name.String,
		Label:         r.Label,
		Command:       r.Command,
		Cwd:           r.Cwd,
		Mode:          r.Mode,
		TmuxSession:   r.TmuxSession.String,
		Status:        vocab.Status(r.Status),
		Signal:        r.Signal.String,
		Reason:        r.Reason.String,
		PID:           int(r.PID.Int64),
		PGID:          int(r.PGID.Int64),
		PIDStart:      r.PIDStart.Int64,
		SupervisorID:  r.SupervisorID.String,
		Stdin:         r.Stdin,
		Color:         r.Color,
		OnExit:        r.OnExit,
		Timeout:       time.Duration(r.TimeoutMS) * time.Millisecond,
		TTL:           time.Duration(r.TTLMS) * time.Millisecond,
		MaxOutput:     r.MaxOutput,
		OutputBytes:   r.OutputBytes,
		OutputLines:   r.OutputLines,
		EvictedBytes:  r.EvictedBytes,
		DroppedBytes:  r.DroppedBytes,
		ReadCursor:    r.ReadCursor,
		UserCPU:       time.Duration(r.UserCPUMS.Int64) * time.Millisecond,
		SysCPU:        time.Duration(r.SysCPUMS.Int64) * time.Millisecond,
		MaxRSSKB:      r.MaxRSSKB.Int64,
		Duration:      time.Duration(r.DurationMS.Int64) * time.Millisecond,
		SurvivorsGone: r.SurvivorsGone,
		BootID:        r.BootID.String,
		TmuxSocket:    r.TmuxSocket.String,
		TmuxSocketSet: r.TmuxSocket.Valid,
		EndTicks:      r.EndTicks.Int64,
		Queue:         r.Queue.String,
		QueuePriority: r.QueuePriority,
		RestartedFrom: r.RestartedFrom.String,
	}
	if r.ExitCode.Valid {
		c := int(r.ExitCode.Int64)
		j.ExitCode = &c
	}
	if err := json.Unmarshal([]byte(r.Argv), &j.Argv); err != nil {
		return Job{}, fmt.Errorf("read job %s: argv: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.EnvNames), &j.EnvNames); err != nil {
		return Job{}, fmt.Errorf("read job %s: env_names: %w", r.ID, err)
	}
	var err error
	if j.CreatedAt, err = ParseTime(r.CreatedAt); err != nil {
		return Job{}, fmt.Errorf("read job %s: created_at: %w", r.ID, err)
	}
	if j.LastAccessAt, err = ParseTime(r.LastAccessAt); err != nil {
		return Job{}, fmt.Errorf("read job %s: last_access_at: %w", r.ID, err)
	}
	if j.StartedAt, err = parseNullTime(r.StartedAt); err != nil {
		return Job{}, fmt.Errorf("read job %s: started_at: %w", r.ID, err)
	}
	if j.EndedAt, err = parseNullTime(r.EndedAt); err != nil {
		return Job{}, fmt.Errorf("read job %s: ended_at: %w", r.ID, err)
	}
	if j.LastOutputAt, err = parseNullTime(r.LastOutputAt); err != nil {
		return Job{}, fmt.Errorf("read job %s: last_output_at: %w", r.ID, err)
	}
	return j, nil
}

func parseNullTime(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := ParseTime(s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullInt(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: n != 0} }

// millis converts d to whole milliseconds, rounding up so that a positive
// duration never becomes 0, which means "none".
func millis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > time.Duration(ms)*time.Millisecond {
		ms++
	}
	return ms
}

// queryJobs runs a query returning jobColumns and converts every row.
func queryJobs(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]Job, error) {
	var rows []jobRow
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(rows))
	for i := range rows {
		j, err := rows[i].job()
		if err != nil {
			return nil, err
		}
		if err := liveOutput(ctx, q, &j); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// getJob runs a query returning at most one job; sql.ErrNoRows when none.
func getJob(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (Job, error) {
	var r jobRow
	if err := sqlx.GetContext(ctx, q, &r, query, args...); err != nil {
		return Job{}, err
	}
	j, err := r.job()
	if err != nil {
		return Job{}, err
	}
	return j, liveOutput(ctx, q, &j)
}

// liveOutput brings the output counters of j, read from its row, up to its
// newest chunk when j has not ended.
func liveOutput(ctx context.Context, q sqlx.QueryerContext, j *Job) error {
	if j.Status.Terminal() {
		return nil
	}
	var end, lines int64
	var at string
	err := q.QueryRowxContext(ctx, liveOutputSQL, j.ID).Scan(&end, &lines, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read job %s: newest output: %w", j.ID, err)
	}
	j.OutputBytes, j.OutputLines = max(j.OutputBytes, end), max(j.OutputLines, lines)
	if t, err := ParseTime(at); err != nil {
		return fmt.Errorf("read job %s: newest output: %w", j.ID, err)
	} else if j.LastOutputAt == nil || t.After(*j.LastOutputAt) {
		j.LastOutputAt = &t
	}
	return nil
}

// inTx runs fn in a write transaction. It waits for the process's other
// write transactions first (LockWrites), without bound but its context;
// the DSN then makes it BEGIN IMMEDIATE, so the transaction holds the
// write lock from its first statement and waits up to BusyTimeout for
// another process's writer.
func (d *DB) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	unlock, err := d.LockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := d.beginPatiently(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

const (
	insertJobQuery = `INSERT INTO jobs (id, scope, name, label, command, argv, cwd, env_names,
	mode, tmux_session, tmux_socket, status, supervisor_id, stdin, color, on_exit, created_at, last_access_at,
	timeout_ms, ttl_ms, max_output, queue, queue_priority, queue_pos, restarted_from)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? = 'queued' THEN (SELECT coalesce(max(queue_pos), 0) + 1 FROM jobs WHERE status = 'queued') END, ?)
	RETURNING ` + jobColumns
	activeNameQuery = `SELECT id FROM jobs
	WHERE scope = ? AND name = ? AND status IN ('queued', 'starting', 'running')`
	insertCreateEventQuery = `INSERT INTO events (job_id, scope, at, kind, from_status, to_status, detail)
	VALUES (?, ?, ?, 'transition', NULL, ?, ?)`
	jobByIDQuery = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
)

// CreateJob inserts a job in status starting and its creation event (from
// no status to starting). In the same transaction it checks that no active
// (or queued) job of the scope has the name (*vocab.NameTakenError) and that
// the limits allow one more active job (*vocab.LimitError).
//
// A job with a Queue or After is created in status queued instead, and so
// is one with QueueOnLimit that the scope's or the total cap would refuse;
// request is then kept with it (queued_starts) for the supervisor that
// starts it (ClaimQueued). After's jobs must exist in the scope; a cycle
// cannot form, since a new job comes after existing ones only.
func (d *DB) CreateJob(ctx context.Context, n NewJob, lim Limits) (Job, error) {
	return d.CreateJobQueued(ctx, n, lim, nil)
}

// CreateJobQueued is CreateJob with the start request kept for a job that
// is queued.
func (d *DB) CreateJobQueued(ctx context.Context, n NewJob, lim Limits, request []byte) (Job, error) {
	if err := validateNewJob(&n); err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	if n.ID == "" {
		n.ID = NewID()
	}
	argv, err := json.Marshal(nonNil(n.Argv))
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	envNames, err := json.Marshal(nonNil(n.EnvNames))
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	detail, err := json.Marshal(createDetail(n))
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	now := FormatTime(d.Now())
	var job Job
	err = d.inTx(ctx, func(tx *sqlx.Tx) error {
		if n.Name != "" {
			var holder string
			err := tx.GetContext(ctx, &holder, activeNameQuery, n.Scope, n.Name)
			if err == nil {
				return &vocab.NameTakenError{Name: n.Name, ID: holder}
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		status := vocab.StatusStarting
		if n.Queue != "" || len(n.After) > 0 {
			status = vocab.StatusQueued
		}
		inScope, total, err := countActive(ctx, tx, n.Scope)
		if err != nil {
			return err
		}
		var limitErr error
		if lim.PerScope > 0 && inScope >= lim.PerScope {
			limitErr = &vocab.LimitError{Scope: n.Scope, Running: inScope, Max: lim.PerScope}
		} else if lim.Total > 0 && total >= lim.Total {
			limitErr = &vocab.LimitError{Scope: n.Scope, Running: total, Max: lim.Total, Total: true}
		}
		if limitErr != nil && status != vocab.StatusQueued {
			if !n.QueueOnLimit {
				return limitErr
			}
			status = vocab.StatusQueued
		}
		if lim.PerLabel > 0 {
			var withLabel int
			if err := tx.GetContext(ctx, &withLabel, countActiveLabelQuery, n.Scope, n.Label); err != nil {
				return err
			}
			if withLabel >= lim.PerLabel {
				return &vocab.LimitError{Scope: n.Scope, Label: n.Label, Running: withLabel, Max: lim.PerLabel}
			}
		}
		if status == vocab.StatusQueued {
			if err := checkDeps(ctx, tx, n); err != nil {
				return err
			}
		}
		var queue sql.NullString
		if status == vocab.StatusQueued || n.Queue != "" {
			queue = sql.NullString{String: n.Queue, Valid: true}
		}
		job, err = getJob(ctx, tx, insertJobQuery,
			n.ID, n.Scope, nullString(n.Name), n.Label, n.Command, string(argv), n.Cwd, string(envNames),
			n.Mode, nullString(n.TmuxSession), tmuxSocket(n), string(status), nullString(n.SupervisorID), n.Stdin, n.Color, n.OnExit,
			now, now, millis(n.Timeout), millis(n.TTL), n.MaxOutput,
			queue, n.Priority, string(status), nullString(n.RestartedFrom),
		)
		if err != nil {
			return err
		}
		if status == vocab.StatusQueued {
			if err := enqueue(ctx, tx, n, now, request); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, insertCreateEventQuery, n.ID, n.Scope, now, string(status), string(detail))
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	return job, nil
}

// validateNewJob fills defaults and rejects what the schema would reject,
// with a readable message instead of a constraint name.
func validateNewJob(n *NewJob) error {
	if n.Mode == "" {
		n.Mode = vocab.ModePipe
	}
	if n.Stdin == "" {
		n.Stdin = vocab.StdinPipe
	}
	switch {
	case n.Scope == "":
		return errors.New("empty scope")
	case n.Command == "":
		return errors.New("empty command")
	case n.Mode != vocab.ModePipe && n.Mode != vocab.ModeTmux && n.Mode != vocab.ModePTY:
		return fmt.Errorf("mode %q is not pipe, tmux or pty", n.Mode)
	case !validStdin(n.Stdin):
		return fmt.Errorf("stdin %q is not pipe, closed or null", n.Stdin)
	case n.Timeout < 0:
		return errors.New("negative timeout")
	case n.TTL < 0:
		return errors.New("negative ttl")
	case n.MaxOutput < 0:
		return errors.New("negative output cap")
	}
	return nil
}

func validStdin(s string) bool {
	return s == vocab.StdinPipe || s == vocab.StdinClosed || s == vocab.StdinNull
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// createDetail is the detail of a creation event. It keeps the command, so
// that the audit trail says what ran after the job row is deleted.
func createDetail(n NewJob) map[string]any {
	m := map[string]any{"command": n.Command, "cwd": n.Cwd}
	if n.Name != "" {
		m["name"] = n.Name
	}
	if n.Label != "" {
		m["label"] = n.Label
	}
	if n.SupervisorID != "" {
		m["supervisor_id"] = n.SupervisorID
	}
	if n.Queue != "" {
		m["queue"] = n.Queue
	}
	if n.Priority != 0 {
		m["priority"] = n.Priority
	}
	if len(n.After) > 0 {
		after := make([]map[string]any, 0, len(n.After))
		for _, dep := range n.After {
			after = append(after, map[string]any{"id": dep.ID, "ok": dep.OK})
		}
		m["after"] = after
	}
	if n.RestartedFrom != "" {
		m["restarted_from"] = n.RestartedFrom
	}
	return m
}

// countActiveLabelQuery counts the active jobs of a scope with one label
// (Limits.PerLabel); the active jobs are few, found by jobs_status.
const countActiveLabelQuery = `SELECT count(*) FROM jobs
	WHERE status IN ('starting', 'running') AND scope = ? AND label = ?`

const countActiveQuery = `SELECT count(*) AS total, coalesce(sum(scope = ?), 0) AS in_scope
	FROM jobs WHERE status IN ('starting', 'running')`

func countActive(ctx context.Context, q sqlx.QueryerContext, scope string) (inScope, total int, err error) {
	var r struct {
		Total   int `db:"total"`
		InScope int `db:"in_scope"`
	}
	if err := sqlx.GetContext(ctx, q, &r, countActiveQuery, scope); err != nil {
		return 0, 0, err
	}
	return r.InScope, r.Total, nil
}

// CountRunning counts active (starting or running) jobs in scope and in all
// scopes, the numbers Limits apply to.
func (d *DB) CountRunning(ctx context.Context, scope string) (inScope, total int, err error) {
	inScope, total, err = countActive(ctx, d, scope)
	if err != nil {
		return 0, 0, fmt.Errorf("count running jobs: %w", err)
	}
	return inScope, total, nil
}

// maxCandidates bounds the ids an vocab.AmbiguousError lists.
const maxCandidates = 10

const (
	jobInScopeQuery = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ? AND scope = ?`
	// jobsByPrefixQuery is a range on the primary key, not LIKE, which would
	// be case-insensitive and scan the table.
	jobsByPrefixQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE id >= ? AND id < ? AND scope = ? ORDER BY created_at, rowid LIMIT ?`
	jobByNameQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE scope = ? AND name = ? ORDER BY created_at DESC, rowid DESC LIMIT 1`
)

// FindJob resolves ref within scope: an exact id, else a unique id prefix of
// at least four characters, else a name (the newest job with that name). A
// prefix that matches several jobs is an *vocab.AmbiguousError unless ref is also
// a job's name. A job of another scope is vocab.ErrNotFound, exactly like a
// missing one.
func (d *DB) FindJob(ctx context.Context, scope, ref string) (Job, error) {
	j, err := d.findJob(ctx, scope, ref)
	if err != nil {
		return Job{}, fmt.Errorf("find job %s: %w", ref, err)
	}
	return j, nil
}

func (d *DB) findJob(ctx context.Context, scope, ref string) (Job, error) {
	if ref == "" {
		return Job{}, vocab.ErrNotFound
	}
	id := strings.ToLower(ref)
	j, err := getJob(ctx, d, jobInScopeQuery, id, scope)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return j, err
	}
	var ambiguous error
	if len(id) >= MinPrefix && isIDText(id) {
		upper := id[:len(id)-1] + string(id[len(id)-1]+1)
		jobs, err := queryJobs(ctx, d, jobsByPrefixQuery, id, upper, scope, maxCandidates+1)
		if err != nil {
			return Job{}, err
		}
		switch len(jobs) {
		case 0:
		case 1:
			return jobs[0], nil
		default:
			e := &vocab.AmbiguousError{Ref: ref}
			for i, j := range jobs {
				if i == maxCandidates {
					break
				}
				e.Candidates = append(e.Candidates, j.ID)
			}
			ambiguous = e
		}
	}
	j, err = getJob(ctx, d, jobByNameQuery, scope, ref)
	switch {
	case err == nil:
		return j, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Job{}, err
	case ambiguous != nil:
		return Job{}, ambiguous
	}
	return Job{}, vocab.ErrNotFound
}

// FindJobByID returns the job with exactly this id, in any scope. It is for
// supervisors, which own jobs of every scope; verbs use FindJob.
func (d *DB) FindJobByID(ctx context.Context, id string) (Job, error) {
	j, err := getJob(ctx, d, jobByIDQuery, id)
	if errors.Is(err, sql.ErrNoRows) {
		err = vocab.ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("find job %s: %w", id, err)
	}
	return j, nil
}

const (
	// findJobsQuery reads the newest chunk of each active job in the same
	// statement (see liveOutput): one read instead of one per job.
	findJobsQuery = `SELECT rowid, ` + jobColumns + `,
	CASE WHEN ended_at IS NULL THEN ` + liveEndSQL + ` END AS live_end,
	CASE WHEN ended_at IS NULL THEN ` + liveLinesSQL + ` END AS live_lines,
	CASE WHEN ended_at IS NULL THEN ` + liveAtSQL + ` END AS live_at
	FROM jobs`
	countJobsQuery = `SELECT count(*) FROM jobs`
	// A scope's listing walks jobs_scope_created newest first and stops
	// at its limit. Left to itself, the planner may prefer jobs_status for
	// a status filter, then sort every job of those statuses; that is right
	// only when the statuses are the active ones, which are few.
	byScopeIndex   = ` INDEXED BY jobs_scope_created`
	byStatusIndex  = ` INDEXED BY jobs_status`
	byCreatedIndex = ` INDEXED BY jobs_created`
)

// listRow is a jobs row with its rowid, for positions, and the end of its
// newest chunk while it runs.
type listRow struct {
	Rowid int64 `db:"rowid"`
	jobRow
	LiveEnd   sql.NullInt64  `db:"live_end"`
	LiveLines sql.NullInt64  `db:"live_lines"`
	LiveAt    sql.NullString `db:"live_at"`
}

// FindJobs lists the jobs that f selects, newest first.
func (d *DB) FindJobs(ctx context.Context, f Filter) ([]Job, error) {
	jobs, _, err := d.FindJobsPage(ctx, f)
	return jobs, err
}

// FindJobsPage lists the jobs that f selects, newest first, and the
// position of the last one (nil when none), from which a listing goes on
// with Filter.After.
func (d *DB) FindJobsPage(ctx context.Context, f Filter) ([]Job, *Position, error) {
	where, args := f.where()
	query := findJobsQuery + where + ` ORDER BY created_at DESC, rowid DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	var rows []listRow
	if err := sqlx.SelectContext(ctx, d, &rows, query, args...); err != nil {
		return nil, nil, fmt.Errorf("find jobs: %w", err)
	}
	jobs := make([]Job, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		j, err := r.job()
		if err != nil {
			return nil, nil, fmt.Errorf("find jobs: %w", err)
		}
		if r.LiveEnd.Valid {
			j.OutputBytes, j.OutputLines = max(j.OutputBytes, r.LiveEnd.Int64), max(j.OutputLines, r.LiveLines.Int64)
			if t, err := ParseTime(r.LiveAt.String); err != nil {
				return nil, nil, fmt.Errorf("find jobs: job %s: newest output: %w", j.ID, err)
			} else if j.LastOutputAt == nil || t.After(*j.LastOutputAt) {
				j.LastOutputAt = &t
			}
		}
		jobs = append(jobs, j)
	}
	if len(rows) == 0 {
		return jobs, nil, nil
	}
	last := rows[len(rows)-1]
	return jobs, &Position{CreatedAt: last.CreatedAt, Rowid: last.Rowid}, nil
}

// CountJobs counts the jobs that f selects, up to f.Limit when it is set:
// a count costs as much as the rows it counts.
func (d *DB) CountJobs(ctx context.Context, f Filter) (int, error) {
	where, args := f.where()
	query := countJobsQuery + where
	if f.Limit > 0 {
		query = `SELECT count(*) FROM (SELECT 1 FROM jobs` + where + ` LIMIT ?)`
		args = append(args, f.Limit)
	}
	var n int
	if err := d.GetContext(ctx, &n, query, args...); err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}

// where renders f as an INDEXED BY clause and a WHERE clause with their
// arguments.
func (f Filter) where() (string, []any) {
	var b strings.Builder
	var args []any
	activeOnly := len(f.Statuses) > 0
	for _, s := range f.Statuses {
		activeOnly = activeOnly && !s.Terminal()
	}
	switch {
	case activeOnly:
		b.WriteString(byStatusIndex)
	case !f.AllScopes:
		b.WriteString(byScopeIndex)
	default:
		b.WriteString(byCreatedIndex)
	}
	b.WriteString(` WHERE 1 = 1`)
	if !f.AllScopes {
		b.WriteString(` AND scope = ?`)
		args = append(args, f.Scope)
	}
	if len(f.Statuses) > 0 {
		b.WriteString(` AND status IN (?` + strings.Repeat(`, ?`, len(f.Statuses)-1) + `)`)
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	if f.SupervisorID != "" {
		b.WriteString(` AND supervisor_id = ?`)
		args = append(args, f.SupervisorID)
	}
	if f.Name != "" {
		b.WriteString(` AND name = ?`)
		args = append(args, f.Name)
	}
	if !f.CreatedSince.IsZero() {
		b.WriteString(` AND created_at >= ?`)
		args = append(args, FormatTime(f.CreatedSince))
	}
	for _, c := range []struct{ col, text string }{
		{"name", f.NameContains}, {"label", f.LabelContains}, {"command", f.CommandContains},
	} {
		if c.text != "" {
			b.WriteString(` AND ` + c.col + ` LIKE ? ESCAPE '\'`)
			args = append(args, "%"+escapeLike(c.text)+"%")
		}
	}
	if f.After != nil {
		// created_at bounds the index range; rowid orders equal times.
		b.WriteString(` AND created_at <= ? AND (created_at < ? OR rowid < ?)`)
		args = append(args, f.After.CreatedAt, f.After.CreatedAt, f.After.Rowid)
	}
	return b.String(), args
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

const setStdinQuery = `UPDATE jobs SET stdin = ? WHERE id = ?`

// SetStdin records the state of the job's stdin: "pipe" (open), "closed"
// (EOF sent) or "null" (/dev/null from the start).
func (d *DB) SetStdin(ctx context.Context, id, state string) error {
	if !validStdin(state) {
		return fmt.Errorf("set stdin of job %s: state %q is not pipe, closed or null", id, state)
	}
	if err := d.execOne(ctx, setStdinQuery, state, id); err != nil {
		return fmt.Errorf("set stdin of job %s: %w", id, err)
	}
	return nil
}

const touchQuery = `UPDATE jobs SET last_access_at = ? WHERE id = ?`

// Touch sets the job's last access time to now. A finished job's ttl counts
// from its last access.
func (d *DB) Touch(ctx context.Context, id string) error {
	if err := d.execOne(ctx, touchQuery, FormatTime(d.Now()), id); err != nil {
		return fmt.Errorf("touch job %s: %w", id, err)
	}
	return nil
}

const (
	advanceCursorQuery = `UPDATE jobs SET read_cursor = ? WHERE id = ? AND read_cursor = ?`
	jobExistsQuery     = `SELECT count(*) FROM jobs WHERE id = ?`
)

// AdvanceReadCursor moves the job's read cursor from one offset to another
// if it is still at from (compare and set). It reports false when another
// reader moved the cursor first, and vocab.ErrNotFound when the job is gone.
func (d *DB) AdvanceReadCursor(ctx context.Context, id string, from, to int64) (bool, error) {
	res, err := d.execWrite(ctx, advanceCursorQuery, to, id, from)
	if err != nil {
		return false, fmt.Errorf("advance read cursor of job %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("advance read cursor of job %s: %w", id, err)
	} else if n == 1 {
		return true, nil
	}
	var exists int
	if err := d.GetContext(ctx, &exists, jobExistsQuery, id); err != nil {
		return false, fmt.Errorf("advance read cursor of job %s: %w", id, err)
	}
	if exists == 0 {
		return false, fmt.Errorf("advance read cursor of job %s: %w", id, vocab.ErrNotFound)
	}
	return false, nil
}

const (
	deleteJobQuery = `DELETE FROM jobs WHERE id = ?`
	// deleteNoteQuery records a job's deletion on its audit trail, which
	// outlives it; it inserts nothing when the job is not there.
	deleteNoteQuery = `INSERT INTO events (job_id, scope, at, kind, detail)
	SELECT id, scope, ?, 'note', json_object('message', 'deleted', 'by', ?) FROM jobs WHERE id = ?`
)

// Who deleted a job, as its deletion note says.
const (
	DeletedByRemove = "rm"
	DeletedByTTL    = "ttl"
)

// DeleteJob deletes the job and leaves a note on its events that it was
// deleted by jobs rm, in one transaction; its output chunks go with it (ON
// DELETE CASCADE), its events stay for their own retention.
func (d *DB) DeleteJob(ctx context.Context, id string) error {
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, deleteNoteQuery, FormatTime(d.Now()), DeletedByRemove, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, deleteJobQuery, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return vocab.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete job %s: %w", id, err)
	}
	return nil
}

// expiredJobsQuery first narrows to rows with an old enough last access
// (through the partial index jobs_expiry), then compares exactly in
// milliseconds; julianday's double is precise to microseconds, so rounding
// recovers the stored millisecond.
const expiredJobsQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE ended_at IS NOT NULL AND ttl_ms > 0 AND last_access_at < ?
	AND CAST(round((julianday(last_access_at) - 2440587.5) * 86400000.0) AS INTEGER) + ttl_ms < ?
	ORDER BY last_access_at`

// ExpiredJobs returns the finished jobs whose ttl has passed since their
// last access, as of now: ended, ttl > 0 and last_access_at + ttl < now.
func (d *DB) ExpiredJobs(ctx context.Context, now time.Time) ([]Job, error) {
	jobs, err := queryJobs(ctx, d, expiredJobsQuery, FormatTime(now), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	return jobs, nil
}

// BatchBudget is how long one transaction of a bulk delete (expired jobs,
// old events) may hold the write lock before it commits and lets other
// writers in. A writer that arrives meanwhile waits for the rest of it.
const BatchBudget = 10 * time.Millisecond

// BatchStatements is the most statements one transaction of a bulk delete
// runs, each deleting at most chunkSlice chunks, eventSlice events or one
// job: the bound of the rows a transaction deletes, on a machine however
// fast (where BatchBudget would let it run on).
const BatchStatements = 256

// BatchRest is how long a bulk delete pauses between its transactions.
// A writer that found the lock taken does not queue for it: SQLite's busy
// handler sleeps and retries, up to 25 ms at a time by then, and a bulk
// delete that began its next transaction at once would take the lock
// again before the writer woke, for as long as the delete lasts.
const BatchRest = 30 * time.Millisecond

// rest pauses for BatchRest, or until ctx ends.
func rest(ctx context.Context) error {
	t := time.NewTimer(BatchRest)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// chunkSlice bounds the chunks one statement deletes: a job may have many
// thousands, and deleting them all at once holds the lock for as long.
const chunkSlice = 64

const (
	expiredJobIDsQuery = `SELECT id FROM jobs
	WHERE ended_at IS NOT NULL AND ttl_ms > 0 AND last_access_at < ?
	AND CAST(round((julianday(last_access_at) - 2440587.5) * 86400000.0) AS INTEGER) + ttl_ms < ?
	ORDER BY last_access_at LIMIT ?`
	deleteChunkSliceQuery = `DELETE FROM chunks WHERE rowid IN
	(SELECT rowid FROM chunks WHERE job_id = ? ORDER BY byte_offset LIMIT ?)`
	deleteExpiredJobQuery  = `DELETE FROM jobs WHERE id = ? AND ended_at IS NOT NULL`
	deleteExpiredNoteQuery = `INSERT INTO events (job_id, scope, at, kind, detail)
	SELECT id, scope, ?, 'note', json_object('message', 'deleted', 'by', ?, 'ttl_ms', ttl_ms) FROM jobs
	WHERE id = ? AND ended_at IS NOT NULL`
)

// ExpiredJobIDs returns up to limit ids of the finished jobs whose ttl has
// passed, as ExpiredJobs selects them, oldest access first.
func (d *DB) ExpiredJobIDs(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var ids []string
	if err := d.SelectContext(ctx, &ids, expiredJobIDsQuery, FormatTime(now), now.UnixMilli(), limit); err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	return ids, nil
}

// DeleteFinishedJobs deletes the finished jobs ids, with their output, in
// short transactions (BatchBudget each, chunkSlice chunks a statement), so
// that deleting many jobs never keeps another writer waiting long. A job
// that is not finished is left alone. It returns how many it deleted.
func (d *DB) DeleteFinishedJobs(ctx context.Context, ids []string) (int, error) {
	deleted := 0
	for len(ids) > 0 {
		n, err := d.deleteBatch(ctx, ids)
		deleted += n.jobs
		if err != nil {
			return deleted, fmt.Errorf("delete expired jobs: %w", err)
		}
		ids = ids[n.done:]
		if len(ids) > 0 {
			if err := rest(ctx); err != nil {
				return deleted, fmt.Errorf("delete expired jobs: %w", err)
			}
		}
	}
	return deleted, nil
}

type batchResult struct{ done, jobs int }

// deleteBatch deletes jobs from the front of ids, in one transaction,
// until BatchBudget has passed or it ran BatchStatements statements. A
// job whose output is not gone then is finished by the next batch.
func (d *DB) deleteBatch(ctx context.Context, ids []string) (batchResult, error) {
	var r batchResult
	start := time.Now()
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		stmts := 0
		for _, id := range ids {
			for {
				// The job's note and delete need two statements after this one.
				if time.Since(start) > BatchBudget || stmts+3 > BatchStatements {
					return nil
				}
				stmts++
				res, err := tx.ExecContext(ctx, deleteChunkSliceQuery, id, chunkSlice)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil {
					return err
				} else if n < chunkSlice {
					break
				}
			}
			stmts += 2
			// The audit trail says why the job is gone; a job that is not
			// finished (not deleted below) gets no note.
			if _, err := tx.ExecContext(ctx, deleteExpiredNoteQuery, FormatTime(d.Now()), DeletedByTTL, id); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, deleteExpiredJobQuery, id)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			r.done++
			r.jobs += int(n)
		}
		return nil
	})
	if err != nil {
		return batchResult{}, err
	}
	return r, nil
}

// execOne runs a statement meant to change exactly one row; no row changed
// is vocab.ErrNotFound.
func (d *DB) execOne(ctx context.Context, query string, args ...any) error {
	res, err := d.execWrite(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return vocab.ErrNotFound
	}
	return nil
}

// tmuxSocket is the tmux_socket of a new job: NULL unless it runs in tmux.
func tmuxSocket(n NewJob) sql.NullString {
	return sql.NullString{String: n.TmuxSocket, Valid: n.Mode == vocab.ModeTmux}
}
