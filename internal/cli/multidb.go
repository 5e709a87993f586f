package cli

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

// readVerbs are the verbs that only read: they open a database they cannot
// write, or one whose supervisors all ran on another host, read-only
// (jobs.Options.OnlyReads).
var readVerbs = map[string]bool{
	"list": true, "status": true, "log": true, "events": true, "poll": true, "wait": true,
}

// multiVerbs read several databases at once (--db given more than once).
var multiVerbs = map[string]bool{"list": true, "status": true, "log": true, "events": true}

// dbPath returns the one database path given with --db, or "" for the
// default. Only the multiVerbs take several.
func dbPath(cc *ucli.Context) (string, error) {
	paths := cc.StringSlice("db")
	switch {
	case len(paths) == 0:
		return "", nil
	case len(paths) > 1:
		verb := ""
		if cc.Command != nil {
			verb = cc.Command.Name
		}
		return "", usagef(verb, "--db given %d times: only list, status, log and events read several databases", len(paths))
	case paths[0] == "":
		return "", usagef("", "empty --db")
	}
	return paths[0], nil
}

// lastDB is the last --db given, for the hidden verbs that jobs runs
// itself with exactly one.
func lastDB(cc *ucli.Context) string {
	paths := cc.StringSlice("db")
	if len(paths) == 0 {
		return ""
	}
	return paths[len(paths)-1]
}

// multi reports whether this invocation reads several databases.
func multi(cc *ucli.Context) bool { return len(cc.StringSlice("db")) > 1 }

// source is one of several databases read at once: its client, and where
// its supervisors ran.
type source struct {
	path  string
	c     *jobs.Client
	hosts map[string]string // host by supervisor id
	host  string            // the newest supervisor's host
}

// hostOf is the host a job of s ran on.
func (s *source) hostOf(j jobs.Job) string {
	if h, ok := s.hosts[j.Supervisor]; ok && h != "" {
		return h
	}
	return s.host
}

// sources opens every --db read-only, once per invocation. Duplicates are
// refused: each row would show twice.
func (r *runner) sources(cc *ucli.Context) ([]*source, error) {
	if r.srcs != nil {
		return r.srcs, nil
	}
	paths := cc.StringSlice("db")
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" {
			return nil, usagef(cc.Command.Name, "empty --db")
		}
		if seen[p] {
			return nil, usagef(cc.Command.Name, "--db %s given twice", quoted(p))
		}
		seen[p] = true
	}
	scope, err := r.scope(cc)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		c, err := jobs.Open(cc.Context, jobs.Options{
			DB: p, Scope: scope, Detached: true, ReadOnly: true,
		})
		if err != nil {
			return nil, err
		}
		r.opened = append(r.opened, c)
		hosts, host, err := c.Hosts(cc.Context)
		if err != nil {
			return nil, err
		}
		r.srcs = append(r.srcs, &source{path: p, c: c, hosts: hosts, host: host})
	}
	return r.srcs, nil
}

// sourceOf finds the one database among several that holds the job ref
// and makes its client the invocation's (r.c), for the verbs that read one
// job: status and log.
func (r *runner) sourceOf(cc *ucli.Context, ref string) (*source, error) {
	srcs, err := r.sources(cc)
	if err != nil {
		return nil, err
	}
	var found []*source
	var firstErr error
	for _, s := range srcs {
		if _, err := s.c.Get(cc.Context, ref); err == nil {
			found = append(found, s)
		} else if !errors.Is(err, jobs.ErrNotFound) {
			return nil, err
		} else if firstErr == nil {
			firstErr = err
		}
	}
	switch len(found) {
	case 0:
		return nil, firstErr
	case 1:
		r.c = found[0].c
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = s.path
	}
	return nil, fmt.Errorf("%w: job %s is in %s: give one --db", jobs.ErrAmbiguous, quoted(ref), strings.Join(names, " and "))
}

// listMulti is list over several databases: each one's jobs, with their
// host, merged newest first.
func (r *runner) listMulti(cc *ucli.Context, f jobs.Filter, tail int64) ([]listItem, error) {
	srcs, err := r.sources(cc)
	if err != nil {
		return nil, err
	}
	var items []listItem
	for _, s := range srcs {
		js, err := s.c.List(cc.Context, f)
		if err != nil {
			return nil, err
		}
		for _, j := range js {
			j.Host = s.hostOf(j)
			it := listItem{Job: j}
			if tail > 0 {
				text := ""
				if j.Scope == s.c.Scope() {
					out, err := s.c.Log(cc.Context, j.ID, jobs.Range{TailLines: tail, Clean: true})
					if err != nil {
						return nil, err
					}
					text = out.Text
				}
				it.Tail = &text
			}
			items = append(items, it)
		}
	}
	slices.SortStableFunc(items, func(a, b listItem) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.Host, b.Host), cmp.Compare(a.ID, b.ID))
	})
	if f.Limit > 0 && len(items) > f.Limit {
		items = items[:f.Limit]
	}
	return items, nil
}

// eventsMulti is events over several databases, each event with its
// database's host, in time order. Cursors are per database: --since
// applies to each.
func (r *runner) eventsMulti(cc *ucli.Context, o jobs.EventOptions) error {
	if o.Follow {
		return usagef("events", "--follow reads one database: give one --db")
	}
	srcs, err := r.sources(cc)
	if err != nil {
		return err
	}
	var all []jobs.Event
	for _, s := range srcs {
		so := o
		if ref := cc.String("job"); ref != "" {
			j, err := s.c.Get(cc.Context, ref)
			switch {
			case err == nil:
				so.JobID = j.ID
			case errors.Is(err, jobs.ErrNotFound) && len(ref) == jobs.IDLength:
				so.JobID = ref
			case errors.Is(err, jobs.ErrNotFound):
				continue
			default:
				return err
			}
		}
		for ev, err := range s.c.Events(cc.Context, so) {
			if err != nil {
				return err
			}
			ev.Host = s.host
			all = append(all, ev)
		}
	}
	slices.SortStableFunc(all, func(a, b jobs.Event) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Host, b.Host), cmp.Compare(a.ID, b.ID))
	})
	for _, ev := range all {
		if err := r.printLine(ev); err != nil {
			return err
		}
	}
	return nil
}
