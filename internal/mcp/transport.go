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
// not the session. (The SDK's behaviour is
// https://github.com/modelcontextprotocol/go-sdk/issues/1209, open as of
// this writing; its proposed fix, pull request 1210, recovers a syntax
// error but not an oversized frame, so the filter stays either way.)
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
	pw       *io.PipeWriter
	pending  *pending
	ids      *wireIDs
}

// drainTimeout bounds how long the end of input waits for answers; the
// longest call (wait) is bounded by maxBound.
const drainTimeout = maxBound + 10*time.Second

// initWait bounds how long a batch that arrives while initialize is being
// answered waits for the protocol version.
const initWait = 30 * time.Second

func newStdioTransport(in io.Reader, out io.Writer) *stdioTransport {
	p := &pending{ids: make(map[string]bool)}
	ids := newWireIDs()
	return &stdioTransport{in: in, maxFrame: maxFrame, out: &lockedWriter{w: out, pending: p, ids: ids}, pending: p, ids: ids}
}

// Connect implements mcp.Transport. It starts the filter goroutine, which
// ends when the input ends or the connection is closed (its next frame then
// has nowhere to go). A read of os.Stdin cannot be interrupted, so after
// close the goroutine may wait for one more line or EOF; the process is
// exiting by then.
func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	pr, pw := io.Pipe()
	t.pr, t.pw = pr, pw
	go t.filter()
	inner := &sdk.IOTransport{Reader: pr, Writer: nopCloser{t.out}, MaxLineLength: -1}
	return inner.Connect(ctx)
}

// close unblocks the filter if it is writing a frame nobody reads.
func (t *stdioTransport) close() {
	if t.pr != nil {
		t.pr.Close()
	}
}

func (t *stdioTransport) filter() {
	br := bufio.NewReaderSize(t.in, 64<<10)
	for {
		line, tooLong, err := readLine(br, t.maxFrame)
		if tooLong {
			// line holds the frame's first and last bytes: the id is
			// usually at one end (the TypeScript SDK writes it last).
			t.reply(oversizeID(line), jsonrpc.CodeInvalidRequest, fmt.Sprintf("message too large: more than %d bytes (at most %s per message)", t.maxFrame, size(int64(t.maxFrame))))
		} else if frame := bytes.TrimSpace(line); len(frame) > 0 {
			if !t.admit(frame) {
				return
			}
		}
		if err != nil {
			t.pending.drain(drainTimeout)
			if errors.Is(err, io.EOF) {
				t.pw.Close()
			} else {
				t.pw.CloseWithError(err)
			}
			return
		}
	}
}

// admit passes one frame on to the SDK, with the ids of its requests
// replaced by the server's own, or answers it with an error. It returns
// false when the SDK is gone.
func (t *stdioTransport) admit(frame []byte) bool {
	if !json.Valid(frame) {
		t.reply(nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
		return true
	}
	if frame[0] == '[' {
		return t.admitBatch(frame)
	}
	a := t.inbound(frame)
	if a.code != 0 {
		t.reply(a.id, a.code, a.msg)
		return true
	}
	return a.out == nil || t.forward(a.out)
}

func (t *stdioTransport) forward(frame []byte) bool {
	t.pending.add(frame)
	t.pending.cancel(frame)
	_, err := t.pw.Write(append(frame, '\n'))
	return err == nil
}

// admitted is one message as it goes on to the SDK, or the error it is
// answered with.
type admitted struct {
	out  []byte          // the message with our id; nil when it goes nowhere
	id   json.RawMessage // the client's id, for an error answer
	ours []byte          // our id, when it is a request
	code int64
	msg  string
}

// inbound checks one message and gives a request our id in place of the
// client's. A cancellation names the request by our id too; one that
// names no unanswered request goes nowhere (the spec lets a receiver
// ignore it, and its id might otherwise be one of ours).
func (t *stdioTransport) inbound(frame []byte) admitted {
	m, ok := objectMembers(frame)
	if !ok {
		return admitted{code: jsonrpc.CodeInvalidRequest, msg: "invalid request: a message is one JSON object, each member named once"}
	}
	a := admitted{out: frame}
	is, hasID := m["id"]
	if hasID && isIDToken(frame[is.start:is.end]) {
		a.id = bytes.Clone(frame[is.start:is.end])
	}
	if ms, ok := m["method"]; ok {
		var method string
		_ = json.Unmarshal(frame[ms.start:ms.end], &method) // a method that is not a string fails check
		switch {
		case a.id != nil:
			a.ours = t.ids.take(a.id, method)
			a.out = splice(frame, is, a.ours)
		case !hasID && method == "notifications/cancelled":
			a.out = t.cancellation(frame, m)
			if a.out == nil {
				return a
			}
		}
	}
	if code, msg := check(a.out); code != 0 {
		if a.ours != nil {
			t.ids.forget(a.ours)
		}
		return admitted{id: a.id, code: code, msg: msg}
	}
	return a
}

// cancellation returns a notifications/cancelled frame naming the request
// by our id, or nil when it names no unanswered request.
func (t *stdioTransport) cancellation(frame []byte, m map[string]span) []byte {
	ps, ok := m["params"]
	if !ok {
		return frame
	}
	pm, ok := objectMembers(frame[ps.start:ps.end])
	if !ok {
		return frame
	}
	rs, ok := pm["requestId"]
	if !ok {
		return frame
	}
	at := span{ps.start + rs.start, ps.start + rs.end}
	ours := t.ids.lookup(frame[at.start:at.end])
	if ours == nil {
		return nil
	}
	return splice(frame, at, ours)
}

// admitBatch passes on a JSON-RPC batch when the session's protocol has
// batches (2025-03-26 and earlier), and otherwise answers each request in
// it with an error, so that no request waits for an answer that will not
// come (the SDK would end the session).
func (t *stdioTransport) admitBatch(frame []byte) bool {
	els, ok := arrayElements(frame)
	if !ok || len(els) == 0 {
		t.reply(nil, jsonrpc.CodeInvalidRequest, "invalid request: empty or malformed batch")
		return true
	}
	if ok, version := t.ids.batches(initWait); !ok {
		t.refuseBatch(frame, els, fmt.Sprintf("invalid request: JSON-RPC batches are not part of MCP %s (the version this session agreed on): send each message on its own line", version))
		return true
	}
	// The SDK answers a batch once every message in it is answered, and
	// counts a notification as a message to answer: a batch holding one
	// would never be answered, and a second such batch ends the session.
	// So notifications (and answers to the server's requests) go on by
	// themselves, first; the requests go on as the batch, which the SDK
	// answers as one.
	var single [][]byte
	batch := []byte{'['}
	var taken [][]byte
	for i, e := range els {
		a := t.inbound(frame[e.start:e.end])
		if a.code != 0 {
			for _, ours := range taken {
				t.ids.forget(ours)
			}
			t.refuseBatch(frame, els, fmt.Sprintf("invalid request: batch message %d: %s", i+1, a.msg))
			return true
		}
		switch {
		case a.ours != nil:
			taken = append(taken, a.ours)
			if len(batch) > 1 {
				batch = append(batch, ',')
			}
			batch = append(batch, a.out...)
		case a.out != nil:
			single = append(single, a.out)
		}
	}
	for _, m := range single {
		if !t.forward(m) {
			return false
		}
	}
	return len(taken) == 0 || t.forward(append(batch, ']'))
}

// refuseBatch answers every request of a batch with an error (code
// -32600), each on its own line, or the batch once (id null) when it holds
// no request.
func (t *stdioTransport) refuseBatch(frame []byte, els []span, msg string) {
	n := 0
	for _, e := range els {
		el := frame[e.start:e.end]
		m, ok := objectMembers(el)
		if !ok {
			continue
		}
		is, hasID := m["id"]
		if _, isRequest := m["method"]; isRequest && hasID && isIDToken(el[is.start:is.end]) {
			t.reply(el[is.start:is.end], jsonrpc.CodeInvalidRequest, msg)
			n++
		}
	}
	if n == 0 {
		t.reply(nil, jsonrpc.CodeInvalidRequest, msg)
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

// The id patterns and hugeNumber are compiled when first used, not when
// the program starts: their counted repetitions compile to thousands of
// states, which every jobs command paid at start-up, MCP or not.
var (
	idAtStart = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9][0-9.eE+-]{0,400}|"(?:[^"\\]|\\.){0,200}")\s*,`)
	})
	idAtEnd = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`,\s*"id"\s*:\s*(-?[0-9][0-9.eE+-]{0,400}|"(?:[^"\\]|\\.){0,200}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$`)
	})
)

// oversizeID reads the id of an oversize request from the ends kept by
// readLine, as the client wrote it, or returns nil when it cannot be read
// safely.
func oversizeID(ends []byte) json.RawMessage {
	head, tail, _ := bytes.Cut(ends, []byte{'\n'})
	m := idAtStart().FindSubmatch(head)
	if m == nil {
		m = idAtEnd().FindSubmatch(tail)
	}
	if m == nil || !json.Valid(m[1]) {
		return nil
	}
	return bytes.Clone(m[1])
}

// check reports whether a message (not a batch) is one the SDK can decode.
// If not, it returns the error to answer with.
func check(frame []byte) (code int64, msg string) {
	if hugeNumber().Match(frame) {
		// The SDK decodes arguments into float64: a number past its
		// range would come back as the decoder's account of Go types.
		var v any
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal(frame, &v); errors.As(err, &te) && strings.HasPrefix(te.Value, "number") {
			return jsonrpc.CodeInvalidParams, "invalid params: number too large: " + cut([]byte(strings.TrimPrefix(te.Value, "number ")))
		}
	}
	if _, err := jsonrpc.DecodeMessage(frame); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "cannot unmarshal number") || strings.Contains(msg, "out of range") {
			msg = "number too large"
		}
		return jsonrpc.CodeInvalidRequest, "invalid request: " + msg
	}
	return 0, ""
}

// hugeNumber finds what may be a number past float64's range: an exponent
// of three digits or a run of 300 digits.
var hugeNumber = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[0-9][eE]\+?[0-9]{3}|[0-9]{300}`)
})

// reply writes a JSON-RPC error response directly to the client; id is
// the client's, as it wrote it (nil for null).
func (t *stdioTransport) reply(id json.RawMessage, code int64, msg string) {
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, map[string]any{"code": code, "message": msg}})
	if err != nil {
		return
	}
	t.out.direct(append(data, '\n'))
}

// lockedWriter serializes writes: the SDK writes each message with one
// Write call, and so does reply, so messages never interleave. It puts the
// client's ids back into the SDK's answers and marks the requests it sees
// answered.
type lockedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pending
	ids     *wireIDs
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	out := l.restore(p)
	if l.pending.cancelled(p) {
		// The client cancelled the request: the spec says not to answer.
		l.pending.answer(p)
		return len(p), nil
	}
	l.mu.Lock()
	_, err := l.w.Write(out)
	l.mu.Unlock()
	l.pending.answer(p)
	return len(p), err
}

// direct writes a message that carries the client's id already.
func (l *lockedWriter) direct(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(p)
}

// restore returns what the SDK wrote with the client's id in each answer.
func (l *lockedWriter) restore(p []byte) []byte {
	body := bytes.TrimRight(p, " \t\r\n")
	rest := p[len(body):]
	if len(body) == 0 {
		return p
	}
	var out []byte
	switch body[0] {
	case '{':
		out = l.restoreOne(body)
	case '[':
		els, ok := arrayElements(body)
		if !ok {
			return p
		}
		out = make([]byte, 0, len(body))
		at := 0
		for _, e := range els {
			out = append(out, body[at:e.start]...)
			out = append(out, l.restoreOne(body[e.start:e.end])...)
			at = e.end
		}
		out = append(out, body[at:]...)
	default:
		return p
	}
	return append(out, rest...)
}

// restoreOne puts the client's id into one answer; other messages (the
// server's requests and notifications) are returned as they are.
func (l *lockedWriter) restoreOne(msg []byte) []byte {
	m, ok := objectMembers(msg)
	if !ok {
		return msg
	}
	is, ok := m["id"]
	if _, request := m["method"]; !ok || request {
		return msg
	}
	var result []byte
	if rs, ok := m["result"]; ok {
		result = msg[rs.start:rs.end]
	}
	raw, ok := l.ids.answer(msg[is.start:is.end], result)
	if !ok {
		return msg
	}
	return splice(msg, is, raw)
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
