package ui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// BenchmarkSearcherFeed: the search's own cost per byte of plain output
// (16-byte lines, as the large-log tests write), by kind of pattern.
func BenchmarkSearcherFeed(b *testing.B) {
	var sb strings.Builder
	for i := range (4 << 20) / 16 {
		fmt.Fprintf(&sb, "%015d\n", i/4096*65536)
	}
	text := sb.String()
	for _, p := range []string{`000000000065536`, `^(000000000065536|000000001048576)$`, `ERROR`, `(?i)error`, `\d{3}5536$`} {
		b.Run(p, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for range b.N {
				s, err := newSearcher(p, 0, searchShown)
				if err != nil {
					b.Fatal(err)
				}
				s.feed(text, 0, jobs.FirstLine)
				s.endLine()
			}
		})
	}
}
