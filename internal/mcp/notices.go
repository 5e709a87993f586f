package mcp

// Completion notices. Every job of the scope is a resource, jobs://ID; a
// client that subscribes to it gets notifications/resources/updated at
// each of its status changes. And when a job of the scope ends, every
// connected client gets a logging notification (level info, logger
// "jobs") carrying Duragent's completion message. Clients receive logging
// notifications once they set a level (logging/setLevel), as MCP asks.
//
// Ends that happen while a server runs are told by that server to each of
// its own clients, so two servers of one scope each tell their own. An end
// counts as delivered only when a completion message was actually sent to
// a client; each delivered end is recorded on the job's audit trail (a
// note, "completion notice delivered"). Ends that no client received —
// they happened while no server ran, or while no client had set a level
// taking info — stay pending: the next client, of this server or a later
// one, that sets such a level gets them, and the note keeps other clients
// from getting them again.
//
// A duragent spawn_process with wait=true returns its result inline, so
// its end gets no completion message (the document: "Only fires if wait:
// false"): the spawn notes on the job's audit trail that no notice is
// wanted ("completion notice not wanted"), before this server can
// announce the end. When its call returns before the end (the call bound),
// a second note ("completion notice wanted") lifts that, and the end is
// announced like any other.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// jobURIPrefix is how a job is named as a resource: jobs://ID.
const jobURIPrefix = "jobs://"

func jobURI(id string) string { return jobURIPrefix + id }

// subscriptionOptions lets clients subscribe to jobs://ID: the job must be
// one of the scope's.
func subscriptionOptions(c *jobs.Client, o *sdk.ServerOptions) {
	o.SubscribeHandler = func(ctx context.Context, req *sdk.SubscribeRequest) error {
		// Answered as JSON-RPC errors with their codes: a plain error
		// reaches the client as code 0.
		id, ok := strings.CutPrefix(req.Params.URI, jobURIPrefix)
		if !ok {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("subscribe %q: resources are jobs://ID", req.Params.URI)}
		}
		_, err := c.Get(ctx, id)
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			return sdk.ResourceNotFoundError(req.Params.URI) // -32002 (wireErrors)
		case errors.Is(err, jobs.ErrInvalid):
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("subscribe %s: %v", req.Params.URI, err)}
		case err != nil:
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("subscribe %s: %v", req.Params.URI, err)}
		}
		return nil
	}
	o.UnsubscribeHandler = func(context.Context, *sdk.UnsubscribeRequest) error { return nil }
}

// addJobResources serves jobs://ID: the job's metadata as JSON.
func addJobResources(c *jobs.Client, srv *sdk.Server) {
	srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "job",
		Title:       "A background job",
		URITemplate: jobURIPrefix + "{id}",
		Description: "A job of this scope: its metadata and status as JSON. Subscribe to be notified of each status change.",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		id, ok := strings.CutPrefix(req.Params.URI, jobURIPrefix)
		if !ok {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		j, err := c.Get(ctx, id)
		if errors.Is(err, jobs.ErrNotFound) {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", req.Params.URI, err)
		}
		b, err := json.Marshal(j)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", req.Params.URI, err)
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
	})
}

// notifier tells one server's clients of the scope's job ends. A
// completion message counts as delivered, and is noted on the job's audit
// trail, only when the SDK handed it to a client's connection: a client
// that set no logging level, or one above info, is sent nothing (the SDK
// drops the message without an error), so for it the end stays pending.
// A pending end is told to the next client, of this server or a later
// one, that sets a level taking info. told keeps one client from being
// told one end twice, by the live announcement and the pending ones.
//
// Two servers whose clients set their level at the same moment may both
// tell one pending end; none records an end as delivered that no client
// got.
type notifier struct {
	c     *jobs.Client
	srv   *sdk.Server
	start time.Time
	// tail is the output a completion message ends with; nil means the
	// engine's tail of 2000 characters from a line start.
	tail func(ctx context.Context, c *jobs.Client, id string) (string, error)
	// spawning is held (read-locked) by each wait=true spawn from before
	// its start until its "not wanted" note is written; an announcement
	// takes it (write-locked) first, so that it never overtakes a note of
	// this server's.
	spawning sync.RWMutex
	mu       sync.Mutex
	told     map[*sdk.ServerSession]map[string]bool
}

// Audit-trail notes about completion notices: a wait=true spawn wants
// none (noteInline) unless its call returned before the end (noteWanted).
const (
	noteInline = "completion notice not wanted: the result is returned inline (spawn_process wait=true)"
	noteWanted = "completion notice wanted: the inline wait reached the call bound"
)

// holdInline is called before a wait=true spawn starts its job; the
// returned func is called once the job is marked (inline) or did not
// start.
func (n *notifier) holdInline() func() {
	n.spawning.RLock()
	return n.spawning.RUnlock
}

// inline notes that job id's end is returned inline and wants no notice.
func (n *notifier) inline(ctx context.Context, id string) {
	_, _ = n.c.NoteOnce(context.WithoutCancel(ctx), id, noteInline)
}

// wanted notes that job id's end, which inline had exempted, is to be
// announced after all.
func (n *notifier) wanted(ctx context.Context, id string) {
	_, _ = n.c.NoteOnce(context.WithoutCancel(ctx), id, noteWanted)
}

func newNotifier(c *jobs.Client, start time.Time) *notifier {
	return &notifier{c: c, start: start, told: map[*sdk.ServerSession]map[string]bool{}}
}

// sentKey marks the context of a completion message so that the sending
// middleware can report that it went out.
type sentKey struct{}

// sending is a sending middleware: it records, in the flag the context
// carries, that a logging notification was written to the connection.
func sending(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if flag, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok && err == nil && method == "notifications/message" {
			flag.Store(true)
		}
		return res, err
	}
}

// tell sends msg to ss unless ss was told of job id already, and reports
// whether it went out.
func (n *notifier) tell(ctx context.Context, ss *sdk.ServerSession, id, msg string) bool {
	n.mu.Lock()
	if n.told[ss][id] {
		n.mu.Unlock()
		return false
	}
	if n.told[ss] == nil {
		n.told[ss] = map[string]bool{}
	}
	n.told[ss][id] = true // held while sending, so that a concurrent tell skips it
	n.mu.Unlock()
	var sent atomic.Bool
	//lint:ignore SA1019 Duragent's completion message is a logging notification; clients still take it
	err := ss.Log(context.WithValue(ctx, sentKey{}, &sent), &sdk.LoggingMessageParams{Level: "info", Logger: "jobs", Data: msg})
	ok := err == nil && sent.Load()
	if !ok {
		n.mu.Lock()
		delete(n.told[ss], id)
		n.mu.Unlock()
	}
	return ok
}

// forget drops the record of sessions that have ended.
func (n *notifier) forget() {
	live := map[*sdk.ServerSession]bool{}
	for ss := range n.srv.Sessions() {
		live[ss] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for ss := range n.told {
		if !live[ss] {
			delete(n.told, ss)
		}
	}
}

// announce follows the scope's audit trail until ctx ends and tells the
// server's clients of each status change that happens from start on. Run
// owns it.
func (n *notifier) announce(ctx context.Context) {
	// From the events of start on: reading the audit trail from its
	// beginning would cost as much as the history, at every server start.
	since, err := n.c.EventCursor(ctx, n.start)
	if err != nil {
		return // the database failed: notices stop, tools go on
	}
	for e, err := range n.c.Events(ctx, jobs.EventOptions{Since: since, Follow: true}) {
		if err != nil {
			return // ctx ended or the database failed: notices stop, tools go on
		}
		if e.Kind != "transition" || e.At.Before(n.start) {
			continue
		}
		_ = n.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: jobURI(e.JobID)})
		if e.To.Terminal() {
			n.ended(ctx, e.JobID)
		}
	}
}

// ended tells every client of the server of job id's end, and notes the
// delivery when at least one got it.
func (n *notifier) ended(ctx context.Context, id string) {
	n.spawning.Lock()
	//lint:ignore SA2001 waits for the wait=true spawns under way to note themselves
	n.spawning.Unlock()
	if _, wanted := noticeState(ctx, n.c, id); !wanted {
		return
	}
	msg, err := completionMessage(ctx, n.c, id, n.tail)
	if err != nil {
		return // removed since
	}
	n.forget()
	sent := false
	for ss := range n.srv.Sessions() {
		sent = n.tell(ctx, ss, id, msg) || sent
	}
	if sent {
		_, _ = n.c.NoteOnce(ctx, id, noticeNote)
	}
}

// noticeNote is the audit-trail note that records a delivered completion
// notice.
const noticeNote = "completion notice delivered"

// maxBacklog bounds the ends told at once when a client sets its level.
const maxBacklog = 100

// backlog is a receiving middleware: when a client sets its logging
// level, it tells it of the scope's ended jobs whose end no client has
// received yet (no delivery note), oldest first.
func (n *notifier) backlog(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "logging/setLevel" || err != nil {
			return res, err
		}
		ss, ok := req.GetSession().(*sdk.ServerSession)
		if !ok {
			return res, err
		}
		list, lerr := n.c.List(ctx, jobs.Filter{Statuses: []jobs.Status{jobs.StatusDone, jobs.StatusFailed, jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost}, Limit: maxBacklog})
		if lerr != nil {
			return res, err
		}
		for i := len(list) - 1; i >= 0; i-- {
			j := list[i]
			if told, wanted := noticeState(ctx, n.c, j.ID); told || !wanted {
				continue
			}
			msg, merr := completionMessage(ctx, n.c, j.ID, n.tail)
			if merr != nil {
				continue
			}
			if !n.tell(ctx, ss, j.ID, msg) {
				continue // told already, or the level does not take info
			}
			_, _ = n.c.NoteOnce(ctx, j.ID, noticeNote)
		}
		return res, err
	}
}

// noticeState reads job id's audit trail: delivered reports a delivered
// completion notice, wanted that the job's end is to be announced (no
// wait=true spawn returned it inline). An error counts as delivered and
// not wanted: better a notice missed than one told twice on every start.
func noticeState(ctx context.Context, c *jobs.Client, id string) (delivered, wanted bool) {
	evs, err := c.History(ctx, id)
	if err != nil {
		return true, false
	}
	inline, lifted := false, false
	for _, e := range evs {
		var d struct {
			Message string `json:"message"`
		}
		if e.Kind != "note" || json.Unmarshal(e.Detail, &d) != nil {
			continue
		}
		switch d.Message {
		case noticeNote:
			delivered = true
		case noteInline:
			inline = true
		case noteWanted:
			lifted = true
		}
	}
	return delivered, !inline || lifted
}

// completionMessage is Duragent's completion message for job id, ending
// with tail's output (nil: the engine's tail from a line start).
func completionMessage(ctx context.Context, c *jobs.Client, id string, tail func(context.Context, *jobs.Client, string) (string, error)) (string, error) {
	j, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	var pr jobs.PollResult
	if tail != nil {
		if pr.Output.Text, err = tail(ctx, c, id); err != nil {
			return "", err
		}
	} else if pr, err = c.Poll(ctx, id, jobs.PollOptions{Tail: duragentTailChars}); err != nil {
		return "", err
	}
	code := "none"
	if j.ExitCode != nil {
		code = fmt.Sprint(*j.ExitCode)
	}
	return fmt.Sprintf("[Background Process Completed]\n\nHandle: %s\nLabel: %s\nCommand: %s\nExit code: %s\nDuration: %s\n\nOutput (last 2000 chars):\n%s",
		j.ID, j.Label, j.Command, code, j.Runtime.Round(time.Millisecond), pr.Output.Text), nil
}
