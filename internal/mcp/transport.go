package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxFrame bounds one inbound JSON-RPC message. A 16 MiB write to stdin
// (maxWriteBytes) fits even when JSON escaping doubles it.
const maxFrame = 64 << 20

// stdioTransport is the SDK's newline-delimited JSON transport with a
// filter in front of it. The SDK's reader ends the session at the first
// frame it cannot decode; the filter answers such a frame with a JSON-RPC
// error (parse error, invalid request, message too large) and passes on only
// frames that decode, so one bad line from a client costs one error reply,
// not the session.
//
// It also holds the end of input back until every request read so far has
// been answered (within drainTimeout): the SDK drops the answers to requests
// still in flight when its input ends, so `printf '…' | jobs mcp` would
// otherwise lose them.
type stdioTransport struct {
	in       io.Reader
	maxFrame int // maxFrame, smaller in tests
	out      *lockedWriter
	pr       *io.PipeReader
	pending  *pending
}

// drainTimeout bounds how long the end of input waits for answers; the
// longest call (wait) is bounded by maxBound.
const drainTimeout = maxBound + 10*time.Second

func newStdioTransport(in io.Reader, out io.Writer) *stdioTransport {
	p := &pending{ids: make(map[string]bool)}
	return &stdioTransport{in: in, maxFrame: maxFrame, out: &lockedWriter{w: out, pending: p}, pending: p}
}

// Connect implements mcp.Transport. It starts the filter goroutine, which
// ends when the input ends or the connection is closed (its next frame then
// has nowhere to go). A read of os.Stdin cannot be interrupted, so after
// close the goroutine may wait for one more line or EOF; the process is
// exiting by then.
func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	pr, pw := io.Pipe()
	t.pr = pr
	go t.filter(pw)
	inner := &sdk.IOTransport{Reader: pr, Writer: nopCloser{t.out}, MaxLineLength: -1}
	return inner.Connect(ctx)
}

// close unblocks the filter if it is writing a frame nobody reads.
func (t *stdioTransport) close() {
	if t.pr != nil {
		t.pr.Close()
	}
}

func (t *stdioTransport) filter(pw *io.PipeWriter) {
	br := bufio.NewReaderSize(t.in, 64<<10)
	for {
		line, tooLong, err := readLine(br, t.maxFrame)
		if tooLong {
			// line holds the frame's first and last bytes: the id is
			// usually at one end (the TypeScript SDK writes it last).
			t.reply(oversizeID(line), jsonrpc.CodeInvalidRequest, fmt.Sprintf("message too large: more than %d bytes (at most %s per message)", t.maxFrame, size(int64(t.maxFrame))))
		} else if frame := bytes.TrimSpace(line); len(frame) > 0 {
			if id, code, msg := check(frame); code != 0 {
				t.reply(id, code, msg)
			} else {
				t.pending.add(frame)
				t.pending.cancel(frame)
				if _, werr := pw.Write(append(frame, '\n')); werr != nil {
					return
				}
			}
		}
		if err != nil {
			t.pending.drain(drainTimeout)
			if errors.Is(err, io.EOF) {
				pw.Close()
			} else {
				pw.CloseWithError(err)
			}
			return
		}
	}
}

// readLine reads one line of at most max bytes. A longer line is read to
// its end and dropped, reporting tooLong; line then holds its first and
// last idProbe bytes.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var tail []byte
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case !tooLong && len(line)+len(chunk) > limit:
			tooLong = true
			line = append(line, chunk...)
			tail = append(tail, line[max(0, len(line)-idProbe):]...)
			line = line[:min(len(line), idProbe)]
		case tooLong:
			tail = append(tail, chunk...)
			tail = tail[max(0, len(tail)-idProbe):]
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			line = append(append(line, '\n'), tail...)
		}
		return line, tooLong, err
	}
}

// idProbe is how many bytes of each end of an oversize frame are kept to
// find its id.
const idProbe = 4096

var (
	idAtStart = regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]{1,15}|"(?:[^"\\]|\\.){0,200}")\s*,`)
	idAtEnd   = regexp.MustCompile(`,\s*"id"\s*:\s*(-?[0-9]{1,15}|"(?:[^"\\]|\\.){0,200}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$`)
)

// oversizeID reads the id of an oversize request from the ends kept by
// readLine, or returns nil when it cannot be read safely.
func oversizeID(ends []byte) any {
	head, tail, _ := bytes.Cut(ends, []byte{'\n'})
	m := idAtStart.FindSubmatch(head)
	if m == nil {
		m = idAtEnd.FindSubmatch(tail)
	}
	if m == nil {
		return nil
	}
	var id any
	if json.Unmarshal(m[1], &id) != nil {
		return nil
	}
	return id
}

// check reports whether frame is a JSON-RPC message (or batch) the SDK can
// decode. If not, it returns the error to answer with and the request id
// when one can be read.
func check(frame []byte) (id any, code int64, msg string) {
	if !json.Valid(frame) {
		return nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON"
	}
	if frame[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(frame, &batch); err != nil || len(batch) == 0 {
			return nil, jsonrpc.CodeInvalidRequest, "invalid request: empty or malformed batch"
		}
		for _, m := range batch {
			if id, code, msg := check(m); code != 0 {
				return id, code, msg
			}
		}
		return nil, 0, ""
	}
	if hugeNumber.Match(frame) {
		// The SDK decodes arguments into float64: a number past its
		// range would come back as the decoder's account of Go types.
		var v any
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal(frame, &v); errors.As(err, &te) && strings.HasPrefix(te.Value, "number") {
			return readID(frame), jsonrpc.CodeInvalidParams, "invalid params: number too large: " + cut([]byte(strings.TrimPrefix(te.Value, "number ")))
		}
	}
	if _, err := jsonrpc.DecodeMessage(frame); err != nil {
		id = readID(frame)
		msg := err.Error()
		if strings.Contains(msg, "cannot unmarshal number") || strings.Contains(msg, "out of range") {
			msg = "number too large"
		}
		return id, jsonrpc.CodeInvalidRequest, "invalid request: " + msg
	}
	return nil, 0, ""
}

// hugeNumber finds what may be a number past float64's range: an exponent
// of three digits or a run of 300 digits.
var hugeNumber = regexp.MustCompile(`[0-9][eE]\+?[0-9]{3}|[0-9]{300}`)

// readID returns a frame's id when it is a string or a number.
func readID(frame []byte) any {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(frame, &probe) != nil {
		return nil
	}
	var id any
	if json.Unmarshal(probe.ID, &id) != nil {
		return nil
	}
	switch id.(type) {
	case string, float64:
		return id
	}
	return nil
}

// reply writes a JSON-RPC error response directly to the client.
func (t *stdioTransport) reply(id any, code int64, msg string) {
	data, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": code, "message": msg},
	})
	if err != nil {
		return
	}
	t.out.Write(append(data, '\n'))
}

// lockedWriter serializes writes: the SDK writes each message with one
// Write call, and so does reply, so messages never interleave. It marks
// the requests it sees answered.
type lockedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pending
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	if l.pending.cancelled(p) {
		// The client cancelled the request: the spec says not to answer.
		l.pending.answer(p)
		return len(p), nil
	}
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	l.pending.answer(p)
	return n, err
}

// pending tracks the ids of requests read but not yet answered, and those
// of them the client cancelled.
type pending struct {
	mu       sync.Mutex
	ids      map[string]bool
	canceled map[string]bool
	idle     chan struct{} // closed when ids becomes empty while drain waits
}

// cancel records the request a notifications/cancelled in frame names, if
// that request is still unanswered.
func (p *pending) cancel(frame []byte) {
	p.each(frame, func(m jsonrpc.Message) {
		r, ok := m.(*jsonrpc.Request)
		if !ok || r.ID.IsValid() || r.Method != "notifications/cancelled" {
			return
		}
		var params struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &params) != nil || params.RequestID == nil {
			return
		}
		key := fmt.Sprint(params.RequestID)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ids[key] {
			if p.canceled == nil {
				p.canceled = make(map[string]bool)
			}
			p.canceled[key] = true
		}
	})
}

// cancelled reports whether frame is the response to a cancelled request.
func (p *pending) cancelled(frame []byte) bool {
	p.mu.Lock()
	none := len(p.canceled) == 0
	p.mu.Unlock()
	if none {
		return false
	}
	m, err := jsonrpc.DecodeMessage(bytes.TrimSpace(frame))
	if err != nil {
		return false
	}
	r, ok := m.(*jsonrpc.Response)
	if !ok {
		return false
	}
	key := fmt.Sprint(r.ID.Raw())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.canceled[key] {
		delete(p.canceled, key)
		return true
	}
	return false
}

// add records the requests in frame (a message or a batch).
func (p *pending) add(frame []byte) {
	p.each(frame, func(m jsonrpc.Message) {
		if r, ok := m.(*jsonrpc.Request); ok && r.ID.IsValid() {
			p.mu.Lock()
			p.ids[fmt.Sprint(r.ID.Raw())] = true
			p.mu.Unlock()
		}
	})
}

// answer forgets the requests that the responses in frame answer.
func (p *pending) answer(frame []byte) {
	p.each(bytes.TrimSpace(frame), func(m jsonrpc.Message) {
		r, ok := m.(*jsonrpc.Response)
		if !ok {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.ids, fmt.Sprint(r.ID.Raw()))
		if len(p.ids) == 0 && p.idle != nil {
			close(p.idle)
			p.idle = nil
		}
	})
}

func (p *pending) each(frame []byte, f func(jsonrpc.Message)) {
	if len(frame) > 0 && frame[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(frame, &batch) != nil {
			return
		}
		for _, raw := range batch {
			if m, err := jsonrpc.DecodeMessage(raw); err == nil {
				f(m)
			}
		}
		return
	}
	if m, err := jsonrpc.DecodeMessage(frame); err == nil {
		f(m)
	}
}

// drain waits until every request seen has been answered, or d passes.
func (p *pending) drain(d time.Duration) {
	p.mu.Lock()
	if len(p.ids) == 0 {
		p.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	p.idle = idle
	p.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	}
}

// nopCloser keeps the SDK from closing stdout when the session ends.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
