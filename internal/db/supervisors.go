package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

// Supervisor is a process that owns live children: a detached `jobs
// supervise` or a program embedding the public package. While it lives it
// holds an exclusive lock on LockPath; a free lock means it died.
type Supervisor struct {
	ID         string
	PID        int
	Host       string
	Kind       string // "detached" or "embedded"
	LockPath   string
	SocketPath string
	Version    string
	StartedAt  time.Time
	EndedAt    *time.Time // set on clean exit or when found dead
}

const supervisorColumns = `id, pid, host, kind, lock_path, socket_path, version, started_at, ended_at`

// supervisorRow is a supervisors row as stored.
type supervisorRow struct {
	ID         string         `db:"id"`
	PID        int            `db:"pid"`
	Host       string         `db:"host"`
	Kind       string         `db:"kind"`
	LockPath   string         `db:"lock_path"`
	SocketPath string         `db:"socket_path"`
	Version    string         `db:"version"`
	StartedAt  string         `db:"started_at"`
	EndedAt    sql.NullString `db:"ended_at"`
}

// supervisor converts a stored row to a Supervisor.
func (r *supervisorRow) supervisor() (Supervisor, error) {
	s := Supervisor{
		ID:         r.ID,
		PID:        r.PID,
		Host:       r.Host,
		Kind:       r.Kind,
		LockPath:   r.LockPath,
		SocketPath: r.SocketPath,
		Version:    r.Version,
	}
	var err error
	if s.StartedAt, err = ParseTime(r.StartedAt); err != nil {
		return Supervisor{}, fmt.Errorf("read supervisor %s: started_at: %w", r.ID, err)
	}
	if s.EndedAt, err = parseNullTime(r.EndedAt); err != nil {
		return Supervisor{}, fmt.Errorf("read supervisor %s: ended_at: %w", r.ID, err)
	}
	return s, nil
}

const insertSupervisorQuery = `INSERT INTO supervisors
	(id, pid, host, kind, lock_path, socket_path, version, started_at, ended_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// CreateSupervisor records a supervisor. A zero StartedAt means d.Now().
func (d *DB) CreateSupervisor(ctx context.Context, s Supervisor) error {
	if s.ID == "" {
		return errors.New("create supervisor: empty id")
	}
	if s.Kind != "detached" && s.Kind != "embedded" {
		return fmt.Errorf("create supervisor %s: kind %q is not detached or embedded", s.ID, s.Kind)
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = d.Now()
	}
	var ended sql.NullString
	if s.EndedAt != nil {
		ended = sql.NullString{String: FormatTime(*s.EndedAt), Valid: true}
	}
	if _, err := d.execWrite(ctx, insertSupervisorQuery, s.ID, s.PID, s.Host, s.Kind,
		s.LockPath, s.SocketPath, s.Version, FormatTime(s.StartedAt), ended); err != nil {
		return fmt.Errorf("create supervisor %s: %w", s.ID, err)
	}
	return nil
}

const supervisorByIDQuery = `SELECT ` + supervisorColumns + ` FROM supervisors WHERE id = ?`

// FindSupervisor returns the supervisor with this id, or vocab.ErrNotFound.
func (d *DB) FindSupervisor(ctx context.Context, id string) (Supervisor, error) {
	var r supervisorRow
	err := d.GetContext(ctx, &r, supervisorByIDQuery, id)
	if errors.Is(err, sql.ErrNoRows) {
		err = vocab.ErrNotFound
	}
	if err != nil {
		return Supervisor{}, fmt.Errorf("find supervisor %s: %w", id, err)
	}
	return r.supervisor()
}

const (
	endSupervisorQuery    = `UPDATE supervisors SET ended_at = ? WHERE id = ? AND ended_at IS NULL`
	supervisorExistsQuery = `SELECT count(*) FROM supervisors WHERE id = ?`
)

// EndSupervisor sets the supervisor's end time to now. Ending one that has
// already ended keeps the first end time; an unknown id is vocab.ErrNotFound.
func (d *DB) EndSupervisor(ctx context.Context, id string) error {
	res, err := d.execWrite(ctx, endSupervisorQuery, FormatTime(d.Now()), id)
	if err != nil {
		return fmt.Errorf("end supervisor %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("end supervisor %s: %w", id, err)
	} else if n == 1 {
		return nil
	}
	var exists int
	if err := d.GetContext(ctx, &exists, supervisorExistsQuery, id); err != nil {
		return fmt.Errorf("end supervisor %s: %w", id, err)
	}
	if exists == 0 {
		return fmt.Errorf("end supervisor %s: %w", id, vocab.ErrNotFound)
	}
	return nil
}

// activeSupervisorsQuery uses the partial index jobs_supervisor, which
// holds only active jobs.
const activeSupervisorsQuery = `SELECT ` + supervisorColumns + ` FROM supervisors s
	WHERE EXISTS (SELECT 1 FROM jobs j
		WHERE j.supervisor_id = s.id AND j.status IN ('starting', 'running'))
	ORDER BY started_at, id`

// SupervisorsWithActiveJobs returns every supervisor, ended or not, that
// owns at least one starting or running job: the ones whose liveness
// decides whether those jobs are lost.
func (d *DB) SupervisorsWithActiveJobs(ctx context.Context) ([]Supervisor, error) {
	return d.selectSupervisors(ctx, "find supervisors with active jobs", activeSupervisorsQuery)
}

const openSupervisorsQuery = `SELECT ` + supervisorColumns + ` FROM supervisors WHERE ended_at IS NULL ORDER BY started_at, id`

// OpenSupervisors returns the supervisors not recorded as ended: the live
// ones and those that died unnoticed.
func (d *DB) OpenSupervisors(ctx context.Context) ([]Supervisor, error) {
	return d.selectSupervisors(ctx, "find open supervisors", openSupervisorsQuery)
}

// selectSupervisors runs a query of supervisorColumns; what names the
// query in an error.
func (d *DB) selectSupervisors(ctx context.Context, what, query string) ([]Supervisor, error) {
	var rows []supervisorRow
	if err := d.SelectContext(ctx, &rows, query); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sups := make([]Supervisor, 0, len(rows))
	for i := range rows {
		s, err := rows[i].supervisor()
		if err != nil {
			return nil, err
		}
		sups = append(sups, s)
	}
	return sups, nil
}
