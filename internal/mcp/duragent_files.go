package mcp

// The duragent profile's files: the document's
// .duragent/processes/<handle>.log (raw output, both streams) and
// <handle>.meta.json (command, pid, status, timestamps), in the agent's
// working directory. The database stays the record; the files are a mirror
// (mirror.go) kept current while a server of the profile runs: the log as
// output arrives, the meta at every status change (written to a temporary
// file, then renamed). A server that starts finds the meta files of its
// scope there and brings them up to date, so a process that ended or was
// found lost while no server ran reads so in its meta file too. The files
// go when the job goes (its TTL, jobs rm).
//
// The agent's working directory is the server's (an MCP host starts the
// server in its project), unless EnvDuragentDir names another.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// EnvDuragentDir names the directory that holds the duragent profile's
// .duragent/processes files; unset, it is the server's working directory.
const EnvDuragentDir = "JOBS_DURAGENT_DIR"

// duragentFiles mirrors the profile's processes into dir.
type duragentFiles struct {
	c   *jobs.Client
	dir string // …/.duragent/processes, absolute
	m   *mirror

	mu      sync.Mutex
	handles map[string]bool // the jobs mirrored
}

// duragentMeta is a .meta.json file: the document's command, pid, status
// and timestamps, with what else the registry tracks (handle, tmux
// session, log file path, spawning session).
type duragentMeta struct {
	Handle          string     `json:"handle"`
	Label           string     `json:"label,omitempty"`
	Command         string     `json:"command"`
	Workdir         string     `json:"workdir"`
	PID             int        `json:"pid,omitempty"`
	Status          string     `json:"status"`
	Killed          bool       `json:"killed,omitempty"`
	ExitCode        *int       `json:"exit_code"`
	TmuxSession     string     `json:"tmux_session,omitempty"`
	LogFile         string     `json:"log_file"`
	Session         string     `json:"session"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at"`
	EndedAt         *time.Time `json:"ended_at"`
	DurationSeconds *int64     `json:"duration_seconds,omitempty"`
}

// newDuragentFiles returns the mirror of c's processes under the agent's
// working directory, or nil when there is none to be had.
func newDuragentFiles(c *jobs.Client) *duragentFiles {
	base := os.Getenv(EnvDuragentDir)
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil
		}
		base = wd
	}
	abs, err := filepath.Abs(base)
	if err != nil {
		return nil
	}
	return &duragentFiles{c: c, dir: filepath.Join(abs, ".duragent", "processes"), m: newMirror(c), handles: map[string]bool{}}
}

// paths are job id's log and meta files.
func (f *duragentFiles) paths(id string) (log, meta string) {
	return filepath.Join(f.dir, id+".log"), filepath.Join(f.dir, id+".meta.json")
}

// add starts mirroring job j (again, after a restart) and brings its files
// up to date. A file that cannot be written leaves the job alone.
func (f *duragentFiles) add(ctx context.Context, id string) {
	log, meta := f.paths(id)
	_, err := f.m.add(ctx, mirrorSpec{JobID: id, Path: log, MetaPath: meta, Meta: func(j jobs.Job) any { return f.meta(j) }})
	f.mu.Lock()
	defer f.mu.Unlock()
	if errors.Is(err, jobs.ErrNotFound) {
		delete(f.handles, id)
		return
	}
	f.handles[id] = true
}

// mirrored reports whether job id has files (as far as this server knows).
func (f *duragentFiles) mirrored(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handles[id]
}

// sync brings job id's files up to date, when it is mirrored.
func (f *duragentFiles) sync(ctx context.Context, id string) {
	_, _ = f.m.sync(ctx, id) // an error is tried again by the next sync
}

func (f *duragentFiles) meta(j jobs.Job) duragentMeta {
	log, _ := f.paths(j.ID)
	m := duragentMeta{Handle: j.ID, Label: j.Label, Command: j.Command, Workdir: j.Cwd, PID: j.PID,
		Status: duragentStatus(j.Status), Killed: j.Status == jobs.StatusKilled, ExitCode: j.ExitCode,
		TmuxSession: j.TmuxSession, LogFile: log, Session: j.Scope,
		CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, EndedAt: j.EndedAt}
	if j.Status == jobs.StatusStarting || j.Status == jobs.StatusQueued {
		m.Status = "spawned"
	}
	if j.Status.Terminal() {
		secs := int64(j.Runtime / time.Second)
		m.DurationSeconds = &secs
	}
	return m
}

// duragentExpiryEvery bounds how often run looks for jobs that are gone.
const duragentExpiryEvery = time.Second

// run restores the mirror of the scope's processes found in the directory
// (the document's crash recovery), then removes the files of mirrored jobs
// that are deleted, until ctx ends; it closes the mirror on its way out.
// The server's Run owns it.
func (f *duragentFiles) run(ctx context.Context) {
	defer f.m.close()
	f.restore(ctx)
	ch := f.c.Changes()
	defer ch.Close()
	for {
		if err := ch.Wait(ctx, mirrorExpiryEvery); err != nil {
			return
		}
		f.expire(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(duragentExpiryEvery):
		}
	}
}

// restore mirrors again the processes of the scope whose meta files are in
// the directory: their logs catch up, their metas take their status now
// (a job found lost, one that ended while no server ran); the files of a
// job that is gone are removed.
func (f *duragentFiles) restore(ctx context.Context) {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".meta.json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(f.dir, e.Name()))
		if err != nil {
			continue
		}
		var m duragentMeta
		if json.Unmarshal(data, &m) != nil || m.Handle != id || m.Session != f.c.Scope() {
			continue // another scope's, or not ours at all
		}
		f.add(ctx, id)
	}
}

// expire removes the files of mirrored jobs that no longer exist, without
// counting as an access to the others (a List, not a Get).
func (f *duragentFiles) expire(ctx context.Context) {
	f.mu.Lock()
	n := len(f.handles)
	f.mu.Unlock()
	if n == 0 {
		return
	}
	all, err := f.c.List(ctx, jobs.Filter{})
	if err != nil {
		return
	}
	exists := make(map[string]bool, len(all))
	for _, j := range all {
		exists[j.ID] = true
	}
	f.mu.Lock()
	var gone []string
	for id := range f.handles {
		if !exists[id] {
			gone = append(gone, id)
			delete(f.handles, id)
		}
	}
	f.mu.Unlock()
	for _, id := range gone {
		f.m.remove(id)
	}
}
