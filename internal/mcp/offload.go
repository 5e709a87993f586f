package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// offloadAfter is OpenClaw's threshold: a session's output past 10 KB is
// offloaded to a file the agent's file tools can read.
const offloadAfter = 10 << 10

// offload is OpenClaw's offloaded output: for each session of the scope
// whose output passed offloadAfter, a file
// <database directory>/sessions/<scope>/bgexec_<sessionId>.log (with the
// default database, $XDG_STATE_HOME/jobs/sessions/<scope>/…) that mirrors
// its output. The database stays the record; the file is the copy the
// document promises, made 0600 in a 0700 directory, emptied by clear and
// deleted with the session (remove, or its TTL).
type offload struct {
	m   *mirror
	c   *jobs.Client
	dir string

	once sync.Once
}

func newOffload(c *jobs.Client) *offload {
	return &offload{m: newMirror(c), c: c, dir: offloadDir(c.DBPath(), c.Scope())}
}

// offloadDir is the directory of a scope's offloaded files, beside the
// database (two databases in one directory get two directories).
func offloadDir(db, scope string) string {
	base := filepath.Base(db)
	sessions := "sessions"
	if base != "jobs.db" {
		sessions = base + ".sessions"
	}
	return filepath.Join(filepath.Dir(db), sessions, scopeDir(scope))
}

// plainScope is compiled when first used: its counted repetition compiles
// to many states, which every jobs command would pay at start-up.
var plainScope = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) })

// scopeDir is a scope as one path component: itself when it is plain, else
// a hash of it (a scope may hold any text).
func scopeDir(scope string) string {
	if plainScope().MatchString(scope) {
		return scope
	}
	sum := sha256.Sum256([]byte(scope))
	return "scope-" + hex.EncodeToString(sum[:12])
}

func (o *offload) path(id string) string {
	return filepath.Join(o.dir, "bgexec_"+id+".log")
}

func (o *offload) spec(id string) mirrorSpec {
	return mirrorSpec{JobID: id, Path: o.path(id), After: offloadAfter}
}

// watch starts keeping a session's file current from its start: the
// mirror makes the file once the output passes offloadAfter.
func (o *offload) watch(ctx context.Context, id string) {
	o.adopt(ctx)
	_, _ = o.m.add(ctx, o.spec(id)) // a file that cannot be written is reported by the reads
}

// sync brings a session's file up to date for a read (poll, log) and says
// where it stands. The job j is the read's: a session not yet mirrored is
// mirrored when its output passed the threshold.
func (o *offload) sync(ctx context.Context, j jobs.Job) (mirrorState, error) {
	o.adopt(ctx)
	if o.m.file(j.ID) != nil {
		return o.m.sync(ctx, j.ID)
	}
	if j.OutputBytes <= offloadAfter {
		return mirrorState{}, nil
	}
	return o.m.add(ctx, o.spec(j.ID))
}

// view is sync for a listing: a session already mirrored is reported as
// it stands (the mirror keeps it current), without a read of its own.
func (o *offload) view(ctx context.Context, j jobs.Job) mirrorState {
	if o.m.file(j.ID) != nil {
		return o.m.state(j.ID)
	}
	st, _ := o.sync(ctx, j)
	return st
}

// clear empties a session's file after its output was cleared.
func (o *offload) clear(ctx context.Context, id string) {
	_, _ = o.m.clear(ctx, id)
}

// remove deletes a session's file. It is removed whether or not the
// mirror knew it (a file left by an earlier server); a failure to delete
// does not stop the removal of the session (the documents: "Remove with
// cleanup failure: log warning, continue removal").
func (o *offload) remove(id string) {
	o.m.remove(id)
	_ = os.Remove(o.path(id))
}

// adopt, once per server, takes over the files an earlier server left in
// the scope's directory: those of sessions that still exist are kept
// current again, those of sessions deleted since (their TTL expired while
// no server ran) are removed.
func (o *offload) adopt(ctx context.Context) {
	o.once.Do(func() {
		ents, err := os.ReadDir(o.dir)
		if err != nil {
			return
		}
		all, err := o.c.List(ctx, jobs.Filter{})
		if err != nil {
			return
		}
		exists := make(map[string]bool, len(all))
		for _, j := range all {
			exists[j.ID] = true
		}
		for _, e := range ents {
			id, pre := strings.CutPrefix(e.Name(), "bgexec_")
			id, suf := strings.CutSuffix(id, ".log")
			if !pre || !suf || !e.Type().IsRegular() {
				continue
			}
			if !exists[id] {
				_ = os.Remove(filepath.Join(o.dir, e.Name())) // left for the next server when it fails
				continue
			}
			_, _ = o.m.add(ctx, o.spec(id))
		}
	})
}

// gone removes the file of a session found gone, when ref is its full id.
func (o *offload) gone(ref string) {
	if o.m.file(ref) != nil {
		o.m.remove(ref)
	}
}

func (o *offload) close() { o.m.close() }
