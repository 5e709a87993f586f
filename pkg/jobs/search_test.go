package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// TestSearchEveryLine: an expression that matches every line (here the
// empty one) finds each line once, numbered in order, the last one
// without its newline included; one that matches nothing counts 0; an
// error from the callback ends the search with it.
func TestSearchEveryLine(t *testing.T) {
	ctx := context.Background()
	c := open(t, jobs.Options{})
	j, err := c.Start(ctx, jobs.Spec{Command: "printf 'a\\n\\nb\\nlast'"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	res, err := c.Search(ctx, j.ID, jobs.SearchOptions{Grep: ""}, func(m jobs.Match) error {
		got = append(got, fmt.Sprintf("%d:%d:%s", m.Line, m.Offset, m.Text))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1:0:a 2:2: 3:3:b 4:5:last"; strings.Join(got, " ") != want || res.Count != 4 || res.Searched != 9 || len(res.Gaps) != 0 {
		t.Errorf("matches %q, count %d, searched %d; want %q, 4, 9", got, res.Count, res.Searched, want)
	}
	res, err = c.Search(ctx, j.ID, jobs.SearchOptions{Grep: "^zzz$"}, nil)
	if err != nil || res.Count != 0 {
		t.Errorf("no match: count %d, %v", res.Count, err)
	}
	stop := errors.New("enough")
	if _, err := c.Search(ctx, j.ID, jobs.SearchOptions{Grep: "."}, func(jobs.Match) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error: %v", err)
	}
	if _, err := c.Search(ctx, j.ID, jobs.SearchOptions{Grep: "("}, nil); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("bad expression: %v", err)
	}
}
