package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

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
type stdioTransport struct {
	in  io.Reader
	out *lockedWriter
	pr  *io.PipeReader
}

func newStdioTransport(in io.Reader, out io.Writer) *stdioTransport {
	return &stdioTransport{in: in, out: &lockedWriter{w: out}}
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
		line, tooLong, err := readLine(br, maxFrame)
		if tooLong {
			t.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message too large: more than %d bytes (at most %d MiB per message)", maxFrame, maxFrame>>20))
		} else if frame := bytes.TrimSpace(line); len(frame) > 0 {
			if id, code, msg := check(frame); code != 0 {
				t.reply(id, code, msg)
			} else if _, werr := pw.Write(append(frame, '\n')); werr != nil {
				return
			}
		}
		if err != nil {
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
// its end and dropped, reporting tooLong.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, tooLong, err
	}
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
	if _, err := jsonrpc.DecodeMessage(frame); err != nil {
		var probe struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(frame, &probe) == nil {
			switch probe.ID.(type) {
			case string, float64:
				id = probe.ID
			}
		}
		return id, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
	}
	return nil, 0, ""
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
// Write call, and so does reply, so messages never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// nopCloser keeps the SDK from closing stdout when the session ends.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
