package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentjobs/jobs/internal/db"
	"github.com/agentjobs/jobs/internal/vocab"
)

func TestTailNeverSplitsUTF8(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 5}) // chunks cut characters
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	text := "aé€😀\xffb😀€é\x80\x80z"
	write(t, a, id, Stdout, []byte(text))
	flush(t, a)
	ctx := context.Background()
	chars := splitChars([]byte(text))
	for n := 1; n <= len(chars)+2; n++ {
		p, err := Tail(ctx, d, id, int64(n), Chars, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join(chars[max(0, len(chars)-n):], "")
		if string(p.Data) != want {
			t.Fatalf("Tail(%d chars) = %q, want %q", n, p.Data, want)
		}
		if p.Start != int64(len(text)-len(want)) || p.End != int64(len(text)) {
			t.Fatalf("Tail(%d chars) covers [%d,%d)", n, p.Start, p.End)
		}
	}
	p, err := Tail(ctx, d, id, 3, Bytes, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Data) != text[len(text)-3:] {
		t.Fatalf("Tail(3 bytes) = %q", p.Data)
	}
}

// splitChars splits b into characters the way Tail counts them.
func splitChars(b []byte) []string {
	var cs []string
	for len(b) > 0 {
		_, n := utf8.DecodeRune(b)
		cs = append(cs, string(b[:n]))
		b = b[n:]
	}
	return cs
}

func TestGrep(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{MaxChunk: 6})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	write(t, a, id, Stdout, []byte("ok 1\nerror: disk\nok 2\n"))
	write(t, a, id, Stderr, []byte("err"))
	write(t, a, id, Stdout, []byte("ok 3\n"))
	write(t, a, id, Stderr, []byte("or: net\nwarning\nerror: last"))
	flush(t, a)
	ctx := context.Background()
	re := regexp.MustCompile(`^error`)
	cases := []struct {
		name string
		f    Filter
		want string
	}{
		{"all streams", Filter{Grep: re}, "error: disk\nerror: last"},
		{"stderr", Filter{Grep: re, Stream: Stderr}, "error: net\nerror: last"},
		{"stdout", Filter{Grep: regexp.MustCompile(`ok`), Stream: Stdout}, "ok 1\nok 2\nok 3\n"},
	}
	for _, c := range cases {
		p, err := ReadRange(ctx, d, id, 0, 0, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if string(p.Data) != c.want || p.More {
			t.Errorf("%s: ReadRange = %q (more %v), want %q", c.name, p.Data, p.More, c.want)
		}
		// A page holds one or two matches: the pages join up.
		var got []byte
		var off int64
		for i := 0; ; i++ {
			p, err := ReadRange(ctx, d, id, off, 12, c.f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Data...)
			if !p.More || i > 20 {
				break
			}
			off = p.NextOffset
		}
		if string(got) != c.want {
			t.Errorf("%s: paged = %q, want %q", c.name, got, c.want)
		}
		p, err = TailLines(ctx, d, id, 1, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.want[strings.LastIndex(strings.TrimSuffix(c.want, "\n"), "\n")+1:]; string(p.Data) != want {
			t.Errorf("%s: TailLines(1) = %q, want %q", c.name, p.Data, want)
		}
	}
	p, err := ReadLines(ctx, d, id, 1, 1, Filter{Grep: re})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Data) != "error: disk\n" || p.Matches != 1 {
		t.Errorf("ReadLines(1,1) grep = %q", p.Data)
	}
}

func TestReadBadArguments(t *testing.T) {
	d := openDB(t)
	id := newJob(t, d, 0)
	ctx := context.Background()
	if _, err := ReadRange(ctx, d, id, -1, 0, Filter{}); err == nil {
		t.Error("negative offset accepted")
	}
	if _, err := ReadRange(ctx, d, id, 0, -1, Filter{}); err == nil {
		t.Error("negative limit accepted")
	}
	if _, err := ReadLines(ctx, d, id, -1, 0, Filter{}); err == nil {
		t.Error("negative line accepted")
	}
	if _, err := Tail(ctx, d, id, -1, Chars, Filter{}); err == nil {
		t.Error("negative tail accepted")
	}
	if _, err := ReadRange(ctx, d, id, 0, 0, Filter{Stream: "stdin"}); err == nil {
		t.Error("invalid stream accepted")
	}
	if _, err := ReadRange(ctx, d, "nosuchjob", 0, 0, Filter{}); !errors.Is(err, ErrJobNotFound) || !errors.Is(err, vocab.ErrNotFound) {
		t.Errorf("missing job: %v", err)
	}
	p, err := Tail(ctx, d, id, 0, Chars, Filter{})
	if err != nil || len(p.Data) != 0 || p.TotalBytes != 0 {
		t.Errorf("tail of an empty job = %+v, %v", p, err)
	}
	p, err = ReadRange(ctx, d, id, 100, 0, Filter{})
	if err != nil || len(p.Data) != 0 || p.Start != 0 || p.More {
		t.Errorf("read past the end of an empty job = %+v, %v", p, err)
	}
}

func TestReadLimits(t *testing.T) {
	d := openDB(t)
	a := newAppender(t, d, AppenderOptions{})
	id := newJob(t, d, 0)
	track(t, a, id, 0)
	data := bytes.Repeat([]byte("0123456789abcde\n"), (DefaultLimit*2)/16)
	write(t, a, id, Stdout, data)
	flush(t, a)
	p, err := ReadRange(context.Background(), d, id, 0, 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data) != DefaultLimit || !p.More || !p.Truncated || p.NextOffset != DefaultLimit || p.Lines != DefaultLimit/16 {
		t.Fatalf("default limit: %d bytes, more %v, truncated %v, next %d, lines %d", len(p.Data), p.More, p.Truncated, p.NextOffset, p.Lines)
	}
	p, err = Tail(context.Background(), d, id, 0, Bytes, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data) != DefaultLimit || p.Start != int64(len(data)-DefaultLimit) {
		t.Fatalf("default tail: %d bytes from %d", len(p.Data), p.Start)
	}
}

// A read that meets bytes freed under it (db.ErrOutputDataGone) is tried
// again, holding the output data file, up to readAttempts times in all;
// other errors are returned as they are.
func TestAgainHoldsTheOutputDataFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var held []bool
	read := func(gone int) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			held = append(held, ctx.Value(holdOutputKey{}) != nil)
			if len(held) <= gone {
				return 0, fmt.Errorf("read chunk: %w", db.ErrOutputDataGone)
			}
			return 42, nil
		}
	}
	if v, err := again(ctx, read(2)); err != nil || v != 42 || !slices.Equal(held, []bool{false, true, true}) {
		t.Fatalf("again: %d, %v, holding the file %v; want 42 on the third call, the second and third holding it", v, err, held)
	}
	held = nil
	if _, err := again(ctx, read(100)); !errors.Is(err, db.ErrOutputDataGone) || len(held) != readAttempts {
		t.Fatalf("again gave up after %d calls with %v; want ErrOutputDataGone after %d", len(held), err, readAttempts)
	}
	held = nil
	if _, err := again(ctx, func(ctx context.Context) (int, error) { held = append(held, false); return 0, errors.New("other") }); err == nil || len(held) != 1 {
		t.Fatalf("another error was tried %d times (%v); want once", len(held), err)
	}
}
