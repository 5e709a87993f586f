package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func init() {
	// binary: writes binaryPayload on stdout.
	helperModes["binary"] = func([]string) error {
		_, err := os.Stdout.Write(binaryPayload())
		return err
	}
	// escapes: writes escapeBurst(1), waits for a line on stdin, writes
	// escapeBurst(2).
	helperModes["escapes"] = func([]string) error {
		if _, err := os.Stdout.Write(escapeBurst(1)); err != nil {
			return err
		}
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		_, err := os.Stdout.Write(escapeBurst(2))
		return err
	}
}

// binaryPayload is every byte value, a run of NULs, a lone CR, CRLF and an
// invalid UTF-8 pair (a UTF-16 byte-order mark).
func binaryPayload() []byte {
	var b bytes.Buffer
	for i := 0; i < 256; i++ {
		b.WriteByte(byte(i))
	}
	b.Write(make([]byte, 1000))
	b.WriteString("\nlone\rCR, CRLF\r\n\xff\xfe<-bom\n")
	return b.Bytes()
}

// escapeBurst is output that tries to reach the reader's terminal: OSC 52
// (write the clipboard), OSC 0 (title), CSI colour and clear, DCS, a
// UTF-8 encoded C1 CSI, a raw 8-bit C1 CSI and DEL.
func escapeBurst(n int) []byte {
	clip := base64.StdEncoding.EncodeToString([]byte("clipboard-secret"))
	return []byte(fmt.Sprintf("burst %d\n\x1b]52;c;%s\x07\x1b]0;title\x1b\\\x1b[31mred\x1b[0m\x1b[2J\x1b[H\n"+
		"\x1bPdcs\x1b\\\u009b31mc1\u009b0m \x9b31m8bit del\x7f\n\x1b]52;c;%s\x1b\\end %d\n", n, clip, clip, n))
}

// checkCleaned fails unless text holds no ESC, C1 control or DEL.
func checkCleaned(t *testing.T, what, text string) {
	t.Helper()
	for i, r := range text {
		if r == 0x1b || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Errorf("%s has %U at byte %d: %q", what, r, i, text)
			return
		}
	}
	if strings.Contains(text, base64.StdEncoding.EncodeToString([]byte("clipboard-secret"))) {
		t.Errorf("%s keeps the OSC 52 payload: %q", what, text)
	}
}

// Row D9 guards: the cleaned text of poll --tail, poll --new and MCP poll,
// log and wait holds no ESC, C1 or DEL of a job printing OSC 52 and CSI
// sequences.
func TestD9CleanedTextHasNoEscapes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start(helper("escapes")...)
	w.waitOutput(id, "end 1")
	var texts int
	check := func(what, text, want string) {
		t.Helper()
		texts++
		checkCleaned(t, what, text)
		if want != "" && (!strings.Contains(text, want) || !strings.Contains(text, "red")) {
			t.Errorf("%s lost the visible text %q: %q", what, want, text)
		}
	}
	check("poll --tail", w.ok("poll", id, "--tail", "5000"), "end 1")
	check("poll --new", w.ok("poll", id, "--new"), "end 1")
	var p struct {
		Output struct {
			Text string `json:"output"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(w.ok("--json", "poll", id, "--tail", "5000")), &p); err != nil {
		t.Fatal(err)
	}
	check("poll --json", p.Output.Text, "end 1")
	w.ok("write", id, "go\n")
	w.waitTerminal(id, 30*time.Second)
	check("poll --new after more", w.ok("poll", id, "--new"), "end 2")
	check("log --clean", w.ok("log", id, "--clean", "--offset", "0"), "end 2")
	cs := w.mcp()
	for _, c := range []struct {
		args map[string]any
		want string // visible text that must survive; poll shows only what is new
	}{
		{map[string]any{"action": "poll", "sessionId": id}, ""},
		{map[string]any{"action": "log", "sessionId": id}, "end 2"},
		{map[string]any{"action": "wait", "sessionId": id, "until": "red", "timeout": 5}, ""},
	} {
		text, isErr := mcpCall(t, cs, "process", c.args)
		if isErr {
			t.Errorf("MCP %v: %s", c.args, text)
		}
		check(fmt.Sprintf("MCP %v", c.args["action"]), text, c.want)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("OSC 52, OSC 0, CSI, DCS, C1 (UTF-8 and 8-bit), DEL: 0 ESC/C1/DEL bytes in %d cleaned texts (poll --tail, --new, --json, log --clean, MCP poll/log/wait)", texts))
}

// Row C4 guards: binary output (every byte value, NUL runs, lone CR, CRLF,
// invalid UTF-8) is stored byte-exact; raw log returns it exactly,
// --json carries it exactly in output_base64, and cleaned text marks the
// invalid bytes with U+FFFD.
func TestC4BinaryOutput(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := binaryPayload()
	id := w.start(helper("binary")...)
	if j := w.waitTerminal(id, 30*time.Second); j.Status != "done" || j.OutputBytes != int64(len(want)) {
		t.Fatalf("job %s with %d bytes of output, want done with %d", j.Status, j.OutputBytes, len(want))
	}
	n := strconv.Itoa(len(want))
	if got := w.ok("log", id, "--offset", "0", "--limit", n); got != string(want) {
		t.Errorf("raw log differs from what the job wrote: %d bytes, want %d", len(got), len(want))
	}
	if got := w.ok("log", id, "--all"); got != string(want) {
		t.Errorf("log --all differs from what the job wrote: %d bytes, want %d", len(got), len(want))
	}
	var out struct {
		Text   string `json:"output"`
		Base64 string `json:"output_base64"`
	}
	raw := w.ok("--json", "log", id, "--offset", "0", "--limit", n)
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatal(err)
	}
	got, err := base64.StdEncoding.DecodeString(out.Base64)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("log --json output_base64 decodes to %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	if !utf8.ValidString(out.Text) {
		t.Errorf("log --json output is not valid UTF-8")
	}
	clean := w.ok("log", id, "--clean", "--offset", "0", "--limit", n)
	if !strings.Contains(clean, "\ufffd\ufffd<-bom") {
		t.Errorf("cleaned text does not mark the invalid bytes with U+FFFD: %q", clean)
	}
	if !strings.Contains(clean, "\nCR, CRLF\n") {
		t.Errorf("cleaned text lost the CRLF line: %q", clean)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d bytes (all 256 values, 1000 NULs, CR, CRLF, \\xff\\xfe): raw log and --json output_base64 byte-exact; cleaned text shows U+FFFD", len(want)))
}

// logOutput is the part of log --json the offset tests read.
type logOutput struct {
	Text       string `json:"output"`
	Start      int64  `json:"start"`
	End        int64  `json:"end"`
	NextOffset int64  `json:"next_offset"`
	TotalBytes int64  `json:"total_bytes"`
	Lines      int64  `json:"lines"`
}

// Row C6 guards: offsets, line numbers and limits that are negative or not
// numbers are usage errors (exit 2); any position past the end, up to
// MaxInt64, gives an empty page with next_offset = total; nothing
// overflows or panics.
func TestC6OffsetsAndLimits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.start("--", "sh", "-c", `printf 'one\ntwo\nthree\n'`)
	w.waitTerminal(id, 30*time.Second)
	const total = 14
	const maxInt64 = "9223372036854775807"
	usage := [][]string{
		{"--offset", "-1"}, {"--limit", "-1"}, {"--from-line", "-1"}, {"--lines", "-5"}, {"--tail", "-1"},
		{"--offset", "abc"}, {"--limit", "1e3"}, {"--offset", "9999999999999999999"}, {"--from-line", "1.5"},
		{"--offset", "-9223372036854775808"}, {"--limit", "0"}, {"--lines", "0"}, {"--from-line", "0"},
		{"--limit", maxInt64}, {"--offset", "1", "--from-line", "1"},
	}
	for _, a := range usage {
		checkErrorLine(t, w.jobs(append([]string{"log", id}, a...)...), 2)
	}
	for _, a := range [][]string{{"--tail", "-1"}, {"--tail", "0"}, {"--tail", "abc"}, {"--tail", "99999999999999999999"}} {
		checkErrorLine(t, w.jobs(append([]string{"poll", id}, a...)...), 2)
	}
	empty := [][]string{
		{"--offset", strconv.Itoa(total)}, {"--offset", strconv.Itoa(total + 1)}, {"--offset", maxInt64},
		{"--offset", maxInt64, "--limit", "16777216"}, {"--from-line", "4"}, {"--from-line", maxInt64},
		{"--from-line", maxInt64, "--lines", maxInt64},
	}
	for _, a := range empty {
		var o logOutput
		r := w.jobs(append([]string{"--json", "log", id}, a...)...)
		if r.code != 0 {
			t.Errorf("log %v: %v", a, r)
			continue
		}
		if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
			t.Fatalf("log %v: %v\n%s", a, err, r.stdout)
		}
		if o.Text != "" || o.NextOffset != total || o.TotalBytes != total || o.Start > o.End {
			t.Errorf("log %v past the end: %+v, want an empty page with next_offset %d", a, o, total)
		}
		if r := w.jobs(append([]string{"log", id}, a...)...); r.code != 0 || r.stdout != "" {
			t.Errorf("log %v past the end (text): %v", a, r)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--offset", "0"}, "one\ntwo\nthree\n"},
		{[]string{"--offset", "4", "--limit", "4"}, "two\n"},
		{[]string{"--from-line", "2", "--lines", maxInt64}, "two\nthree\n"},
		{[]string{"--tail", maxInt64}, "one\ntwo\nthree\n"},
	} {
		if r := w.jobs(append([]string{"log", id}, c.args...)...); r.code != 0 || r.stdout != c.want {
			t.Errorf("log %v: %v, want stdout %q", c.args, r, c.want)
		}
	}
	// MCP takes the same numbers as JSON.
	cs := w.mcp()
	for _, args := range []map[string]any{
		{"offset": -1}, {"limit": -1}, {"offset": "abc"}, {"offset": 1e300}, {"offset": 9223372036854775807.0},
	} {
		args["action"], args["sessionId"] = "log", id
		text, _ := mcpCall(t, cs, "process", args)
		if strings.Contains(text, "panic") || strings.Contains(text, "goroutine") {
			t.Errorf("MCP log %v: %q", args, text)
		}
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Errorf("MCP server stopped answering after hostile offsets: %v", err)
	}
	t.Logf("MATRIX-FIGURE %s", fmt.Sprintf("%d malformed offsets/limits: exit 2, one line; %d past-the-end reads (to MaxInt64): empty, next_offset = total; 0 panics", len(usage)+4, len(empty)))
}
