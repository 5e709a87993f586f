package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// didYouMean returns " (did you mean X?)" for the name closest to word
// when one is close enough to be a typo, else "". Close enough is an edit
// distance of at most 2 (a third of a short word), or word being the start
// of exactly one name.
func didYouMean(word string, names []string, prefix string) string {
	best, bestD := "", 3
	if len(word) <= 4 {
		bestD = 2
	}
	var starts []string
	for _, n := range names {
		if d := editDistance(word, n); d < bestD {
			best, bestD = n, d
		}
		if len(word) >= 2 && strings.HasPrefix(n, word) {
			starts = append(starts, n)
		}
	}
	if best == "" && len(starts) == 1 {
		best = starts[0]
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + prefix + best + "?"
}

// editDistance is the Levenshtein distance between a and b, with a swap of
// two neighbouring letters counted as one edit (the commonest typo).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// commandNames are the names a person may type as a verb.
func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Names()...)
		}
	}
	return out
}

// flagNames are the long names of flags.
func flagNames(flags []ucli.Flag) []string {
	var out []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				out = append(out, n)
			}
		}
	}
	return out
}
