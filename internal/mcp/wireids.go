package mcp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// wireIDs gives every request the client sends an id of the server's own
// and puts the client's id back, byte for byte, into the answer.
//
// The SDK keeps a request id as an int64 or a string: a number past int64
// (2^64-1), one past float64's integers (2^53+1), a fraction or an
// exponent came back changed, and a string came back re-escaped. A client
// matches answers to requests by id, so a changed id is an answer lost.
// The SDK sees small integers of ours instead (never reused, so a late
// answer cannot be taken for another), and the client's id travels only
// in this table.
//
// It also learns the protocol version the session agreed on, from the
// answer to initialize: whether a JSON-RPC batch is a message of the
// protocol depends on it.
type wireIDs struct {
	mu      sync.Mutex
	next    int64
	ours    map[int64]clientID // our id → the client's
	byRaw   map[string]int64   // the client's id → ours, for cancellation
	version string             // the agreed protocol version, "" before initialize
	init    chan struct{}      // closed when initialize is answered; nil when none is pending
}

// clientID is a request's id as the client wrote it, and its method.
type clientID struct {
	raw    json.RawMessage
	method string
}

func newWireIDs() *wireIDs {
	return &wireIDs{ours: make(map[int64]clientID), byRaw: make(map[string]int64)}
}

// take records a request's id (raw, a JSON string or number) and returns
// the id the SDK sees instead.
func (w *wireIDs) take(raw []byte, method string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	w.ours[w.next] = clientID{raw: bytes.Clone(raw), method: method}
	w.byRaw[idKey(raw)] = w.next
	if method == "initialize" && w.init == nil && w.version == "" {
		w.init = make(chan struct{})
	}
	return strconv.AppendInt(nil, w.next, 10)
}

// forget drops a request that will not reach the SDK (its frame was
// answered with an error already).
func (w *wireIDs) forget(ours []byte) {
	n, err := strconv.ParseInt(string(ours), 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop(n)
}

func (w *wireIDs) drop(n int64) {
	c, ok := w.ours[n]
	if !ok {
		return
	}
	delete(w.ours, n)
	if k := idKey(c.raw); w.byRaw[k] == n {
		delete(w.byRaw, k)
	}
	if c.method == "initialize" && w.init != nil {
		close(w.init)
		w.init = nil
	}
}

// lookup returns the SDK's id for a request the client names by its own
// id (in a cancellation), or nil when no such request is unanswered.
func (w *wireIDs) lookup(raw []byte) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.byRaw[idKey(raw)]
	if !ok {
		return nil
	}
	return strconv.AppendInt(nil, n, 10)
}

// answer returns the client's id for the SDK's answer to request ours and
// forgets the request; result is the answer's result, read for the
// protocol version when it answers initialize.
func (w *wireIDs) answer(ours []byte, result []byte) (json.RawMessage, bool) {
	n, err := strconv.ParseInt(string(ours), 10, 64)
	if err != nil {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.ours[n]
	if !ok {
		return nil, false
	}
	if c.method == "initialize" && result != nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(result, &r) == nil && r.ProtocolVersion != "" {
			w.version = r.ProtocolVersion
		}
	}
	w.drop(n)
	return c.raw, true
}

// batches reports whether the session's protocol has JSON-RPC batches:
// 2025-03-26 and earlier have them, 2025-06-18 removed them (the SDK ends
// the session at a batch from then on). A batch that arrives while
// initialize is being answered waits for the answer, at most wait.
func (w *wireIDs) batches(wait time.Duration) (ok bool, version string) {
	w.mu.Lock()
	init := w.init
	w.mu.Unlock()
	if init != nil {
		t := time.NewTimer(wait)
		select {
		case <-init:
		case <-t.C:
		}
		t.Stop()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.init != nil {
		return false, "unknown"
	}
	return w.version < batchlessVersion, w.version
}

// batchlessVersion is the first protocol version without JSON-RPC batches.
const batchlessVersion = "2025-06-18"

// idKey is what a cancellation's requestId is matched by: a string by its
// value (however it is escaped), a number by its spelling.
func idKey(raw []byte) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s" + s
		}
	}
	return "n" + string(raw)
}

// span is where a value lies in a JSON text.
type span struct{ start, end int }

// objectMembers returns where each member's value of the JSON object in
// data lies, and false when data is not one object or names a member
// twice. The values are read, not decoded, so every byte is kept.
func objectMembers(data []byte) (map[string]span, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	m := make(map[string]span)
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if _, dup := m[key]; dup || start < 0 || !bytes.Equal(data[start:end], raw) {
			return nil, false
		}
		m[key] = span{start, end}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	return m, true
}

// arrayElements returns where each element of the JSON array in data lies.
func arrayElements(data []byte) ([]span, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, false
	}
	var out []span
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if start < 0 || !bytes.Equal(data[start:end], raw) {
			return nil, false
		}
		out = append(out, span{start, end})
	}
	return out, true
}

// splice returns data with the bytes at s replaced by v.
func splice(data []byte, s span, v []byte) []byte {
	out := make([]byte, 0, len(data)-(s.end-s.start)+len(v))
	out = append(out, data[:s.start]...)
	out = append(out, v...)
	return append(out, data[s.end:]...)
}

// isIDToken reports whether raw is an id JSON-RPC allows besides null: a
// string or a number.
func isIDToken(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}
