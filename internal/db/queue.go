package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Queue is a named queue of a scope with what waits and runs in it.
type Queue struct {
	Scope, Name string
	// Parallel is how many of its jobs run at once.
	Parallel int
	// Paused queues start none of their jobs.
	Paused bool
	// Running counts its starting and running jobs, Queued its waiting
	// ones.
	Running, Queued int
}

// QueueUpdate changes a queue; nil fields stay as they are (a new queue
// takes parallel 1, not paused).
type QueueUpdate struct {
	Parallel *int
	Paused   *bool
}

// Claim is a queued job whose turn came: ClaimQueued moved it to starting.
type Claim struct {
	Job Job
	// Request is the start request kept with it when it was queued.
	Request json.RawMessage
}

const (
	insertQueueQuery = `INSERT INTO queues (scope, name, created_at) VALUES (?, ?, ?)
	ON CONFLICT (scope, name) DO NOTHING`
	insertDepQuery         = `INSERT OR IGNORE INTO job_deps (job_id, after_id, ok) VALUES (?, ?, ?)`
	insertQueuedStartQuery = `INSERT INTO queued_starts (job_id, request) VALUES (?, ?)`
	depJobScopeQuery       = `SELECT scope FROM jobs WHERE id = ?`
	depsOfQuery            = `SELECT after_id FROM job_deps WHERE job_id = ?`
)

// checkDeps refuses waits on jobs that do not exist in the scope, and a
// wait that would close a cycle (the new job among what its waits wait
// for, which only a job given its own id can reach).
func checkDeps(ctx context.Context, tx *sqlx.Tx, n NewJob) error {
	for _, dep := range n.After {
		if dep.ID == n.ID {
			return fmt.Errorf("%w: job %s cannot come after itself (a cycle)", vocab.ErrInvalid, n.ID)
		}
		var scope string
		err := tx.GetContext(ctx, &scope, depJobScopeQuery, dep.ID)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && scope != n.Scope) {
			return fmt.Errorf("dependency %s: %w", dep.ID, vocab.ErrNotFound)
		}
		if err != nil {
			return err
		}
	}
	// Walk what the waits wait for: reaching the new job is a cycle.
	seen := map[string]bool{}
	todo := make([]string, 0, len(n.After))
	for _, dep := range n.After {
		todo = append(todo, dep.ID)
	}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		if id == n.ID {
			return fmt.Errorf("%w: the dependencies of job %s form a cycle", vocab.ErrInvalid, n.ID)
		}
		var next []string
		if err := tx.SelectContext(ctx, &next, depsOfQuery, id); err != nil {
			return err
		}
		todo = append(todo, next...)
	}
	return nil
}

// enqueue records what a queued job waits for and its start request.
func enqueue(ctx context.Context, tx *sqlx.Tx, n NewJob, now string, request []byte) error {
	if n.Queue != "" {
		if _, err := tx.ExecContext(ctx, insertQueueQuery, n.Scope, n.Queue, now); err != nil {
			return err
		}
	}
	for _, dep := range n.After {
		if _, err := tx.ExecContext(ctx, insertDepQuery, n.ID, dep.ID, dep.OK); err != nil {
			return err
		}
	}
	if request == nil {
		request = []byte("null")
	}
	_, err := tx.ExecContext(ctx, insertQueuedStartQuery, n.ID, string(request))
	return err
}

const (
	// queuedOfQuery walks jobs_queued: the supervisor's queued jobs in
	// the order they start.
	queuedOfQuery = `SELECT id, scope, coalesce(queue, '') AS queue FROM jobs INDEXED BY jobs_queued
	WHERE supervisor_id = ? AND status = 'queued'
	ORDER BY queue_priority DESC, queue_pos LIMIT ?`
	activeByScopeQuery = `SELECT scope, count(*) AS n FROM jobs
	WHERE status IN ('starting', 'running') GROUP BY scope`
	activeByQueueQuery = `SELECT scope, queue, count(*) AS n FROM jobs
	WHERE status IN ('starting', 'running') AND queue IS NOT NULL AND queue <> '' GROUP BY scope, queue`
	queueRowQuery = `SELECT parallel, paused FROM queues WHERE scope = ? AND name = ?`
	depsQuery     = `SELECT d.after_id, d.ok, j.status FROM job_deps d
	LEFT JOIN jobs j ON j.id = d.after_id WHERE d.job_id = ? ORDER BY d.rowid`
	queuedStartQuery = `SELECT request FROM queued_starts WHERE job_id = ?`
)

// claimBatch bounds the queued jobs one ClaimQueued looks at: the
// transaction holds the write lock while it looks.
const claimBatch = 500

// ClaimQueued moves to starting, in one transaction and in their order
// (priority, then position), the queued jobs of supervisor supID whose turn
// has come: every job they wait for has ended (done, for an OK wait),
// their queue is not paused and runs fewer than its parallel jobs, and the
// scope's and the total running caps (lim) have room. It returns them with
// their start requests, in that order; starting them is the caller's
// duty. The queued jobs one of whose OK waits ended otherwise are moved to
// failed with the reason "dependency X failed" and returned apart.
// Racing claimers (other supervisors) never claim a job twice: the move
// is conditional on the status queued.
func (d *DB) ClaimQueued(ctx context.Context, supID string, lim Limits) (claimed []Claim, failed []Job, err error) {
	type candidate struct {
		ID    string `db:"id"`
		Scope string `db:"scope"`
		Queue string `db:"queue"`
	}
	type failure struct{ id, reason string }
	var fails []failure
	now := FormatTime(d.Now())
	err = d.inTx(ctx, func(tx *sqlx.Tx) error {
		claimed, fails = nil, nil
		var cands []candidate
		if err := tx.SelectContext(ctx, &cands, queuedOfQuery, supID, claimBatch); err != nil {
			return err
		}
		if len(cands) == 0 {
			return nil
		}
		inScope := map[string]int{}
		total := 0
		var byScope []struct {
			Scope string `db:"scope"`
			N     int    `db:"n"`
		}
		if err := tx.SelectContext(ctx, &byScope, activeByScopeQuery); err != nil {
			return err
		}
		for _, r := range byScope {
			inScope[r.Scope] = r.N
			total += r.N
		}
		type qkey struct{ scope, name string }
		inQueue := map[qkey]int{}
		var byQueue []struct {
			Scope string `db:"scope"`
			Queue string `db:"queue"`
			N     int    `db:"n"`
		}
		if err := tx.SelectContext(ctx, &byQueue, activeByQueueQuery); err != nil {
			return err
		}
		for _, r := range byQueue {
			inQueue[qkey{r.Scope, r.Queue}] = r.N
		}
		type qconf struct {
			Parallel int  `db:"parallel"`
			Paused   bool `db:"paused"`
		}
		confs := map[qkey]qconf{}
		for _, c := range cands {
			k := qkey{c.Scope, c.Queue}
			if c.Queue != "" {
				conf, ok := confs[k]
				if !ok {
					err := tx.GetContext(ctx, &conf, queueRowQuery, c.Scope, c.Queue)
					if errors.Is(err, sql.ErrNoRows) {
						conf = qconf{Parallel: 1}
					} else if err != nil {
						return err
					}
					confs[k] = conf
				}
				if conf.Paused || inQueue[k] >= conf.Parallel {
					continue
				}
			}
			ready, reason, err := depsReady(ctx, tx, c.ID)
			if err != nil {
				return err
			}
			if reason != "" {
				fails = append(fails, failure{c.ID, reason})
				continue
			}
			if !ready {
				continue
			}
			if lim.PerScope > 0 && inScope[c.Scope] >= lim.PerScope {
				continue
			}
			if lim.Total > 0 && total >= lim.Total {
				break // nothing else can start either
			}
			var req string
			if err := tx.GetContext(ctx, &req, queuedStartQuery, c.ID); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if _, err := tx.ExecContext(ctx, dropQueuedStartQuery, c.ID); err != nil {
				return err
			}
			job, err := getJob(ctx, tx, toStartingQuery, c.ID, vocab.StatusQueued)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, insertTransitionEventQuery, now, string(vocab.StatusQueued),
				string(vocab.StatusStarting), "{}", c.ID); err != nil {
				return err
			}
			claimed = append(claimed, Claim{Job: job, Request: json.RawMessage(req)})
			inScope[c.Scope]++
			total++
			if c.Queue != "" {
				inQueue[k]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim queued jobs: %w", err)
	}
	if len(claimed) > 0 {
		d.touchStatusMark()
	}
	var errs []error
	for _, f := range fails {
		j, err := d.Transition(ctx, f.id, Transition{To: vocab.StatusFailed, Reason: f.reason})
		if errors.Is(err, vocab.ErrInvalidTransition) || errors.Is(err, vocab.ErrNotFound) {
			continue // killed or claimed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		failed = append(failed, j)
	}
	return claimed, failed, errors.Join(errs...)
}

// depsReady reports whether every job id waits for has ended; reason is
// set when one it needed done ended otherwise (or is gone).
func depsReady(ctx context.Context, tx *sqlx.Tx, id string) (ready bool, reason string, err error) {
	var deps []struct {
		After  string         `db:"after_id"`
		OK     bool           `db:"ok"`
		Status sql.NullString `db:"status"`
	}
	if err := tx.SelectContext(ctx, &deps, depsQuery, id); err != nil {
		return false, "", err
	}
	ready = true
	for _, dep := range deps {
		if !dep.Status.Valid {
			// Deleted: only finished jobs expire, with a result nobody
			// can read any more.
			if dep.OK {
				return false, "dependency " + dep.After + " failed (it is gone)", nil
			}
			continue
		}
		st := vocab.Status(dep.Status.String)
		if !st.Terminal() {
			ready = false
			continue
		}
		if dep.OK && st != vocab.StatusDone {
			return false, "dependency " + dep.After + " failed", nil
		}
	}
	return ready, "", nil
}

const (
	queuedOwnersQuery = `SELECT DISTINCT supervisor_id FROM jobs INDEXED BY jobs_queued
	WHERE status = 'queued' AND supervisor_id IS NOT NULL AND supervisor_id <> ?`
	adoptQueuedQuery = `UPDATE jobs SET supervisor_id = ? WHERE status = 'queued' AND supervisor_id = ?`
	countQueuedQuery = `SELECT count(*) FROM jobs INDEXED BY jobs_queued WHERE supervisor_id = ? AND status = 'queued'`
)

// AdoptQueued makes supervisor supID the owner of the queued jobs of every
// other supervisor for which alive is false (it died, or closed with jobs
// still waiting), so that they start in their turn. It returns how many
// jobs it adopted.
func (d *DB) AdoptQueued(ctx context.Context, supID string, alive func(Supervisor) bool) (int, error) {
	var owners []string
	if err := d.SelectContext(ctx, &owners, queuedOwnersQuery, supID); err != nil {
		return 0, fmt.Errorf("adopt queued jobs: %w", err)
	}
	n := 0
	for _, owner := range owners {
		sup, err := d.FindSupervisor(ctx, owner)
		if err != nil && !errors.Is(err, vocab.ErrNotFound) {
			return n, fmt.Errorf("adopt queued jobs: %w", err)
		}
		if err == nil && alive(sup) {
			continue
		}
		res, err := d.execWrite(ctx, adoptQueuedQuery, supID, owner)
		if err != nil {
			return n, fmt.Errorf("adopt queued jobs: %w", err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, nil
}

// CountQueued counts the queued jobs supervisor supID owns.
func (d *DB) CountQueued(ctx context.Context, supID string) (int, error) {
	var n int
	if err := d.GetContext(ctx, &n, countQueuedQuery, supID); err != nil {
		return 0, fmt.Errorf("count queued jobs: %w", err)
	}
	return n, nil
}

const (
	queuesQuery = `SELECT q.scope, q.name, q.parallel, q.paused,
	(SELECT count(*) FROM jobs j WHERE j.status IN ('starting', 'running') AND j.scope = q.scope AND j.queue = q.name) AS running,
	(SELECT count(*) FROM jobs j WHERE j.status = 'queued' AND j.scope = q.scope AND j.queue = q.name) AS queued
	FROM queues q WHERE q.scope = ?
	UNION ALL
	SELECT ?, '', 0, 0, 0, count(*) FROM jobs WHERE status = 'queued' AND scope = ? AND queue = ''
	HAVING count(*) > 0
	ORDER BY 2`
)

// SetQueue creates or changes the named queue of scope and returns it.
func (d *DB) SetQueue(ctx context.Context, scope, name string, u QueueUpdate) (Queue, error) {
	if name == "" {
		return Queue{}, fmt.Errorf("set queue: %w: empty queue name", vocab.ErrInvalid)
	}
	if u.Parallel != nil && *u.Parallel < 1 {
		return Queue{}, fmt.Errorf("set queue %s: %w: parallel must be at least 1", name, vocab.ErrInvalid)
	}
	var par, paused sql.NullInt64
	if u.Parallel != nil {
		par = sql.NullInt64{Int64: int64(*u.Parallel), Valid: true}
	}
	if u.Paused != nil {
		p := int64(0)
		if *u.Paused {
			p = 1
		}
		paused = sql.NullInt64{Int64: p, Valid: true}
	}
	const insert = `INSERT INTO queues (scope, name, parallel, paused, created_at)
	VALUES (?, ?, coalesce(?, 1), coalesce(?, 0), ?) ON CONFLICT (scope, name) DO NOTHING`
	const update = `UPDATE queues SET parallel = coalesce(?, parallel), paused = coalesce(?, paused)
	WHERE scope = ? AND name = ?`
	err := d.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, scope, name, par, paused, FormatTime(d.Now())); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, update, par, paused, scope, name)
		return err
	})
	if err != nil {
		return Queue{}, fmt.Errorf("set queue %s: %w", name, err)
	}
	d.touchStatusMark() // a waiting job may start now
	qs, err := d.Queues(ctx, scope)
	if err != nil {
		return Queue{}, err
	}
	for _, q := range qs {
		if q.Name == name {
			return q, nil
		}
	}
	return Queue{}, fmt.Errorf("set queue %s: %w", name, vocab.ErrNotFound)
}

// Queues lists the named queues of scope by name, with their counts, and
// first, when jobs wait in it, the scope's own queue (Name "", for jobs
// that wait for the scope's cap or their dependencies only).
func (d *DB) Queues(ctx context.Context, scope string) ([]Queue, error) {
	var rows []struct {
		Scope    string `db:"scope"`
		Name     string `db:"name"`
		Parallel int    `db:"parallel"`
		Paused   bool   `db:"paused"`
		Running  int    `db:"running"`
		Queued   int    `db:"queued"`
	}
	if err := d.SelectContext(ctx, &rows, queuesQuery, scope, scope, scope); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	qs := make([]Queue, 0, len(rows))
	for _, r := range rows {
		qs = append(qs, Queue{Scope: r.Scope, Name: r.Name, Parallel: r.Parallel, Paused: r.Paused, Running: r.Running, Queued: r.Queued})
	}
	return qs, nil
}

const (
	frontQuery = `UPDATE jobs SET
	queue_priority = (SELECT max(queue_priority) FROM jobs j WHERE j.status = 'queued' AND j.scope = jobs.scope AND j.queue IS jobs.queue),
	queue_pos = (SELECT min(queue_pos) FROM jobs j WHERE j.status = 'queued' AND j.scope = jobs.scope AND j.queue IS jobs.queue) - 1
	WHERE id = ? AND status = 'queued'`
)

// MoveToFront puts the queued job id first in its queue: the highest
// priority of the queue's waiting jobs and a place before them all. A job
// that is not queued is vocab.ErrNotRunning's kin: an error naming its
// status.
func (d *DB) MoveToFront(ctx context.Context, id string) error {
	res, err := d.execWrite(ctx, frontQuery, id)
	if err != nil {
		return fmt.Errorf("move job %s to the front: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("move job %s to the front: %w: it is not queued", id, vocab.ErrInvalid)
	}
	d.touchStatusMark()
	return nil
}

const positionsQuery = `SELECT id, row_number() OVER (PARTITION BY scope, queue ORDER BY queue_priority DESC, queue_pos) AS pos
	FROM jobs WHERE status = 'queued' AND scope = ?`

// QueuePositions returns the place of every queued job of scope in its
// queue, 1 for the next to start.
func (d *DB) QueuePositions(ctx context.Context, scope string) (map[string]int, error) {
	var rows []struct {
		ID  string `db:"id"`
		Pos int    `db:"pos"`
	}
	if err := d.SelectContext(ctx, &rows, positionsQuery, scope); err != nil {
		return nil, fmt.Errorf("read queue positions: %w", err)
	}
	m := make(map[string]int, len(rows))
	for _, r := range rows {
		m[r.ID] = r.Pos
	}
	return m, nil
}

const depsOfJobQuery = `SELECT after_id, ok FROM job_deps WHERE job_id = ? ORDER BY rowid`

// Deps returns what job id waits (or waited) for, in the order given.
func (d *DB) Deps(ctx context.Context, id string) ([]Dep, error) {
	var rows []struct {
		After string `db:"after_id"`
		OK    bool   `db:"ok"`
	}
	if err := d.SelectContext(ctx, &rows, depsOfJobQuery, id); err != nil {
		return nil, fmt.Errorf("read dependencies of job %s: %w", id, err)
	}
	deps := make([]Dep, 0, len(rows))
	for _, r := range rows {
		deps = append(deps, Dep{ID: r.After, OK: r.OK})
	}
	return deps, nil
}
