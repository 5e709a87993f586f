package mcp

// Completion notices. Every job of the scope is a resource, jobs://ID; a
// client that subscribes to it gets notifications/resources/updated at
// each of its status changes. And when a job of the scope ends, every
// connected client gets a logging notification (level info, logger
// "jobs") carrying seed 002's completion message. Clients receive logging
// notifications once they set a level (logging/setLevel), as MCP asks.
//
// Notices are live: each running server announces the ends it sees happen
// while it runs to each of its own clients, so two servers of one scope
// each tell their own client.

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
		for ss := range srv.Sessions() {
			_ = ss.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "jobs", Data: msg})
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
