package mcp

// Completion notices. Every job of the scope is a resource, jobs://ID; a
// client that subscribes to it gets notifications/resources/updated at
// each of its status changes. And when a job of the scope ends, every
// connected client gets a logging notification (level info, logger
// "jobs") carrying seed 002's completion message. Clients receive logging
// notifications once they set a level (logging/setLevel), as MCP asks.
//
// Ends that happen while a server runs are told by that server to each of
// its own clients, so two servers of one scope each tell their own. Each
// delivered end is recorded on the job's audit trail (a note, "completion
// notice delivered"). Ends that happened while no server ran, so that no
// note records them, are told once per scope: the first client of the next
// server that sets a logging level gets them, and the note makes sure no
// other server's client gets them again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// jobURIPrefix is how a job is named as a resource: jobs://ID.
const jobURIPrefix = "jobs://"

func jobURI(id string) string { return jobURIPrefix + id }

// subscriptionOptions lets clients subscribe to jobs://ID: the job must be
// one of the scope's.
func subscriptionOptions(c *jobs.Client, o *sdk.ServerOptions) {
	o.SubscribeHandler = func(ctx context.Context, req *sdk.SubscribeRequest) error {
		id, ok := strings.CutPrefix(req.Params.URI, jobURIPrefix)
		if !ok {
			return fmt.Errorf("subscribe %q: resources are jobs://ID", req.Params.URI)
		}
		if _, err := c.Get(ctx, id); err != nil {
			return fmt.Errorf("subscribe %s: %w", req.Params.URI, err)
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

// announce follows the scope's audit trail until ctx ends and tells srv's
// clients of each status change that happens from start on. Run owns it.
func announce(ctx context.Context, c *jobs.Client, srv *sdk.Server, start time.Time) {
	for e, err := range c.Events(ctx, jobs.EventOptions{Follow: true}) {
		if err != nil {
			return // ctx ended or the database failed: notices stop, tools go on
		}
		if e.Kind != "transition" || e.At.Before(start) {
			continue
		}
		_ = srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: jobURI(e.JobID)})
		if !e.To.Terminal() {
			continue
		}
		msg, err := completionMessage(ctx, c, e.JobID)
		if err != nil {
			continue // removed since
		}
		sent := false
		for ss := range srv.Sessions() {
			//lint:ignore SA1019 seed 002's completion message is a logging notification; clients still take it
			sent = ss.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "jobs", Data: msg}) == nil || sent
		}
		if sent {
			_, _ = c.NoteOnce(ctx, e.JobID, noticeNote)
		}
	}
}

// noticeNote is the audit-trail note that records a delivered completion
// notice.
const noticeNote = "completion notice delivered"

// maxBacklog bounds the ends told at once when a server starts.
const maxBacklog = 100

// backlog returns a middleware that, when a client sets its logging level,
// tells it of the scope's jobs that ended before start and whose end no
// server has told yet.
func backlog(c *jobs.Client, start time.Time) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if method != "logging/setLevel" || err != nil {
				return res, err
			}
			ss, ok := req.GetSession().(*sdk.ServerSession)
			if !ok {
				return res, err
			}
			list, lerr := c.List(ctx, jobs.Filter{Statuses: []jobs.Status{jobs.StatusDone, jobs.StatusFailed, jobs.StatusKilled, jobs.StatusTimedOut, jobs.StatusLost}, Limit: maxBacklog})
			if lerr != nil {
				return res, err
			}
			for i := len(list) - 1; i >= 0; i-- { // oldest first
				j := list[i]
				if j.EndedAt == nil || !j.EndedAt.Before(start) {
					continue // the live announcement tells it
				}
				if ok, nerr := c.NoteOnce(ctx, j.ID, noticeNote); nerr != nil || !ok {
					continue
				}
				if msg, merr := completionMessage(ctx, c, j.ID); merr == nil {
					//lint:ignore SA1019 seed 002's completion message is a logging notification; clients still take it
					_ = ss.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "jobs", Data: msg})
				}
			}
			return res, err
		}
	}
}

// completionMessage is seed 002's completion message for job id.
func completionMessage(ctx context.Context, c *jobs.Client, id string) (string, error) {
	j, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	pr, err := c.Poll(ctx, id, jobs.PollOptions{Tail: duragentTailChars})
	if err != nil {
		return "", err
	}
	code := "none"
	if j.ExitCode != nil {
		code = fmt.Sprint(*j.ExitCode)
	}
	return fmt.Sprintf("[Background Process Completed]\n\nHandle: %s\nLabel: %s\nCommand: %s\nExit code: %s\nDuration: %s\n\nOutput (last 2000 chars):\n%s",
		j.ID, j.Label, j.Command, code, j.Runtime.Round(time.Millisecond), pr.Output.Text), nil
}
