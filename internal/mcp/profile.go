package mcp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultProfile is the tool set served when none is named: OpenClaw.
const DefaultProfile = "openclaw"

// EnvProfile names the profile when `jobs mcp` is given no --profile.
const EnvProfile = "JOBS_MCP_PROFILE"

// profile is one agent interface served over the one engine: the tools a
// harness built against that interface calls, with its words and fields.
// Every profile acts on the same scope through pkg/jobs, so a job started
// under one is seen under every other and in the CLI.
type profile struct {
	instructions func(scope string) string
	add          func(s *server, srv *sdk.Server)
	// completionTail is the output a completion message ends with; nil
	// means the engine's tail from a line start.
	completionTail func(ctx context.Context, c *jobs.Client, id string) (string, error)
	// isolate says the profile's documents keep each conversation's
	// sessions apart: given no scope, its server serves the
	// conversation's (RunOwnScope).
	isolate bool
}

var profiles = map[string]profile{
	"openclaw":    {instructions: instructions, add: addOpenClaw, isolate: true},
	"claude-code": {instructions: claudeInstructions, add: addClaudeCode},
	"duragent":    {instructions: duragentInstructions, add: addDuragent, completionTail: duragentTail},
	"macos-shell": {instructions: macInstructions, add: addMacShell},
}

// Profiles lists the profile names, sorted.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewProfileServer returns an MCP server whose tools are profile's, acting
// on c's scope. An empty profile is DefaultProfile.
func NewProfileServer(c *jobs.Client, version, name string) (*sdk.Server, error) {
	srv, _, err := newProfileServer(c, version, name, time.Now())
	return srv, err
}

// newProfileServer is NewProfileServer with the notifier that tells its
// clients of job ends from start on; Run runs its announce.
func newProfileServer(c *jobs.Client, version, name string, start time.Time) (*sdk.Server, *notifier, error) {
	srv, n, _, err := newProfileState(c, version, name, start)
	return srv, n, err
}

// newProfileState is newProfileServer with the tools' state, which Run
// closes.
func newProfileState(c *jobs.Client, version, name string, start time.Time) (*sdk.Server, *notifier, *server, error) {
	if name == "" {
		name = DefaultProfile
	}
	p, ok := profiles[name]
	if !ok {
		return nil, nil, nil, fmt.Errorf("unknown profile %q (one of %s)", name, strings.Join(Profiles(), ", "))
	}
	if version == "" {
		version = "dev"
	}
	s := newState(c)
	opts := &sdk.ServerOptions{Instructions: p.instructions(c.Scope())}
	subscriptionOptions(c, opts)
	srv := sdk.NewServer(&sdk.Implementation{Name: "jobs", Title: "jobs: durable background commands", Version: version}, opts)
	n := newNotifier(c, start)
	n.srv, n.tail = srv, p.completionTail
	s.notices = n
	p.add(s, srv)
	addJobResources(c, srv)
	srv.AddReceivingMiddleware(n.backlog, wireErrors)
	srv.AddSendingMiddleware(sending)
	return srv, n, s, nil
}
