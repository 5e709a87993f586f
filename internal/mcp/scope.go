package mcp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// A server given no scope (no --scope, no JOBS_SCOPE) under a profile
// whose documents isolate sessions per conversation (OpenClaw: "Sessions
// are isolated by conversationId", "No cross-agent session access") does
// not serve the shared scope "default": it serves the conversation its
// client names, else a scope of its own.
//
// MCP has no conversation in its protocol. What a client says of itself
// comes once, in initialize: clientInfo (the application: "claude-code",
// "cursor-vscode"; the same for every conversation of that application)
// and an optional _meta object. So:
//
//   - a client that knows its conversation passes it as
//     initialize params._meta.conversationId (the documents' own key): the
//     scope is that id, and the same id after a restart of the server finds
//     the same jobs;
//   - any other client gets a scope of its own for the connection,
//     mcp-<clientInfo.name>-<random>: a stdio server is started per
//     conversation (or per window) by every common client, so two
//     conversations never see each other's jobs. Its jobs run on and stay
//     readable from the CLI (`jobs --scope mcp-… list`, or `jobs list
//     --all-scopes`); a new connection does not see them.
//
// A conversation that must keep its jobs across restarts of the server,
// with a client that sends no conversationId, names its scope in the
// server's configuration (JOBS_SCOPE or --scope), which always wins.
// Profiles whose documents keep processes per workspace or across restarts
// (duragent, macos-shell, claude-code) serve c's scope as before.

// conversationKey is the key of initialize's _meta that names the
// conversation.
const conversationKey = "conversationId"

// maxPeek bounds the first message read to choose the scope; a longer
// one (an initialize is a few hundred bytes) gets a scope of its own.
const maxPeek = 1 << 20

// initializeFrame is what scopeFor reads of the first message.
type initializeFrame struct {
	Method string `json:"method"`
	Params struct {
		Meta       map[string]any `json:"_meta"`
		ClientInfo struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	} `json:"params"`
}

// scopeFor chooses the scope of a connection from its first message.
func scopeFor(frame []byte) string {
	var f initializeFrame
	if json.Unmarshal(frame, &f) == nil && f.Method == "initialize" {
		if id, ok := f.Params.Meta[conversationKey].(string); ok && validScope(id) {
			return id
		}
		return ownScope(f.Params.ClientInfo.Name)
	}
	return ownScope("")
}

// validScope says whether s can name a scope (as jobs.Open checks it).
func validScope(s string) bool {
	return strings.TrimSpace(s) != "" && len(s) <= jobs.MaxScopeBytes && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// ownScope is a scope no other connection has: mcp-<client>-<random>, the
// client's name kept to letters, digits, '.', '_' and '-'.
func ownScope(client string) string {
	var b strings.Builder
	for _, r := range client {
		switch {
		case b.Len() >= 40:
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		case r == ' ' || r == '/':
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if name == "" {
		name = "client"
	}
	return "mcp-" + name + "-" + strings.ToLower(rand.Text()[:10])
}

// peekFrame reads the first line of br (at most maxPeek bytes of it), or
// returns what it read when ctx ends first. The bytes read are returned
// so that the server reads them again.
func peekFrame(ctx context.Context, br *bufio.Reader) ([]byte, error) {
	type read struct{ line []byte }
	ch := make(chan read, 1)
	go func() {
		var line []byte
		for len(line) < maxPeek {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		ch <- read{line}
	}()
	select {
	case r := <-ch:
		return r.line, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
