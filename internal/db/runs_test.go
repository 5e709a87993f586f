package db

import "testing"

// RunsWithin cuts power-of-two runs of at most MaxRunRows items that stay
// within the budget, covering every item once and in order.
func TestRunsWithin(t *testing.T) {
	cases := []struct {
		sizes  []int
		budget int
		want   [][2]int
	}{
		{sizes: []int{10, 10, 10}, budget: 100, want: [][2]int{{0, 2}, {2, 3}}},
		{sizes: []int{60, 60, 60, 60}, budget: 100, want: [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
		{sizes: []int{500, 1, 1}, budget: 100, want: [][2]int{{0, 1}, {1, 3}}},
		{sizes: nil, budget: 100, want: nil},
	}
	for _, c := range cases {
		var got [][2]int
		err := RunsWithin(len(c.sizes), func(i int) int { return c.sizes[i] }, c.budget, func(lo, hi int) error {
			got = append(got, [2]int{lo, hi})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("sizes %v budget %d: runs %v, want %v", c.sizes, c.budget, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("sizes %v budget %d: runs %v, want %v", c.sizes, c.budget, got, c.want)
			}
		}
	}
	// Many small items: runs of MaxRunRows.
	n := 3*MaxRunRows + 5
	covered := 0
	if err := RunsWithin(n, func(int) int { return 1 }, 1<<20, func(lo, hi int) error {
		if lo != covered || hi-lo > MaxRunRows || (hi-lo)&(hi-lo-1) != 0 {
			t.Fatalf("run [%d, %d) after %d", lo, hi, covered)
		}
		covered = hi
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if covered != n {
		t.Fatalf("covered %d of %d", covered, n)
	}
}
