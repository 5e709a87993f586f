package jobs

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTailStartEarliestLineThatFits: the text of a tail is what the raw
// bytes from its start clean to, it starts at the earliest line whose text
// fits, and inside a line only when the last line alone does not fit.
func TestTailStartEarliestLineThatFits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 300; run++ {
		var b strings.Builder
		lines := 1 + r.IntN(40)
		for i := 0; i < lines; i++ {
			switch r.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "\x1b[3%dmcolour %d\x1b[0m", r.IntN(8), i)
			case 1:
				for p := 0; p <= 100; p += 10 + r.IntN(30) {
					fmt.Fprintf(&b, "\r%3d%% [%s]", p, strings.Repeat("#", p/10))
				}
			case 2:
				b.WriteString(strings.Repeat("é", r.IntN(70)))
			}
			if i < lines-1 || r.IntN(2) == 0 {
				b.WriteByte('\n')
			}
		}
		data := []byte(b.String())
		n := int64(1 + r.IntN(200))
		for _, clean := range []bool{true, false} {
			pos, text := tailStart(data, 0, true, n, clean)
			if text != render(data[pos:], clean) {
				t.Fatalf("run %d: text is not what data[%d:] renders to", run, pos)
			}
			if c := utf8.RuneCountInString(text); int64(c) > n {
				t.Fatalf("run %d: %d characters, limit %d", run, c, n)
			}
			atLine := pos == 0 || data[pos-1] == '\n'
			// No earlier line start fits.
			for i := 0; i < pos; i++ {
				if (i == 0 || data[i-1] == '\n') && int64(utf8.RuneCountInString(render(data[i:], clean))) <= n {
					t.Fatalf("run %d (clean %v): starts at %d, but the line at %d fits", run, clean, pos, i)
				}
			}
			if !atLine {
				last := strings.LastIndexByte(string(data[:len(data)-1]), '\n') + 1
				if pos < last {
					t.Fatalf("run %d (clean %v): starts inside a line (%d) before the last one (%d)", run, clean, pos, last)
				}
			}
		}
	}
}
