package db_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

// FuzzFindJobRef looks jobs up by random refs (ids, prefixes, names, SQL
// and LIKE metacharacters, NULs): FindJob must never panic, never return a
// job of another scope, return only a job that the ref names (exact id, id
// prefix of 4+ characters, or name), fail with vocab.ErrNotFound or vocab.ErrAmbiguous
// otherwise, and leave the database as it was.
func FuzzFindJobRef(f *testing.F) {
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(f.TempDir(), "jobs.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	if err := d.CreateSupervisor(ctx, db.Supervisor{ID: "fuzzsup", Kind: "embedded", LockPath: "/nonexistent"}); err != nil {
		f.Fatal(err)
	}
	type made struct{ id, scope, name string }
	var jobs []made
	for i, spec := range []made{
		{"aaaabbbbcccc2", "alice", "web"}, {"aaaabbbbcccc3", "alice", ""}, {"aaaazzzzzzzz7", "bob", "web"},
		{"", "alice", "build%"}, {"", "bob", "x' OR '1'='1"}, {"", "alice", "_"},
	} {
		j, err := d.CreateJob(ctx, db.NewJob{ID: spec.id, Scope: spec.scope, Name: spec.name, Command: "true",
			Cwd: "/", SupervisorID: "fuzzsup", Mode: "pipe", Stdin: "pipe"}, db.Limits{})
		if err != nil {
			f.Fatalf("job %d: %v", i, err)
		}
		jobs = append(jobs, made{j.ID, j.Scope, j.Name})
		f.Add(j.ID, j.Scope)
		f.Add(j.ID[:5], spec.scope)
	}
	for _, s := range []string{"aaaa", "aaa", "AAAAB", "web", "build%", "%", "_", "____", "x' OR '1'='1", "'; DROP TABLE jobs; --", "a\x00b", "aaaabbbbcccc2 ", "zzzz{"} {
		f.Add(s, "alice")
		f.Add(s, "bob")
	}
	count := func() int {
		var n int
		if err := d.GetContext(ctx, &n, `SELECT count(*) FROM jobs`); err != nil {
			f.Fatal(err)
		}
		return n
	}
	total := count()
	f.Fuzz(func(t *testing.T, ref, scope string) {
		j, err := d.FindJob(ctx, scope, ref)
		switch {
		case err == nil:
			if j.Scope != scope {
				t.Fatalf("FindJob(%q, %q) returned a job of scope %q", scope, ref, j.Scope)
			}
			low := strings.ToLower(ref)
			byID := j.ID == low || (len(low) >= 4 && strings.HasPrefix(j.ID, low))
			if !byID && j.Name != ref {
				t.Fatalf("FindJob(%q, %q) returned %s (name %q), which the ref does not name", scope, ref, j.ID, j.Name)
			}
		case errors.Is(err, vocab.ErrNotFound):
			// Must not exist: no job of this scope with this exact id or name.
			for _, m := range jobs {
				if m.scope == scope && (m.id == strings.ToLower(ref) || (m.name != "" && m.name == ref)) {
					t.Fatalf("FindJob(%q, %q): not found, but job %s matches", scope, ref, m.id)
				}
			}
		case errors.Is(err, vocab.ErrAmbiguous):
			var ae *vocab.AmbiguousError
			if !errors.As(err, &ae) || len(ae.Candidates) < 2 {
				t.Fatalf("FindJob(%q, %q): ambiguous without candidates: %v", scope, ref, err)
			}
		default:
			t.Fatalf("FindJob(%q, %q): unexpected error %v", scope, ref, err)
		}
		if n := count(); n != total {
			t.Fatalf("the lookup changed the jobs table: %d rows, was %d", n, total)
		}
	})
}
