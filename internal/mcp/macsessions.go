package mcp

// The macos-shell profile's sessions (the document's "Session
// integration"): create_shell_session, list_shell_sessions and
// close_session, named as the macOS Shell MCP server names them. A
// session is a name, a working directory and an environment that
// run_background and run_command use; a job's session is its label. The
// sessions of a server are its own (in memory: jobs never stores the
// values of an environment); a session that has running processes is
// listed by every server of the scope, from its jobs' labels.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentjobs/jobs/internal/textclean"
	"github.com/agentjobs/jobs/pkg/jobs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type macCreateSessionInput struct {
	Name string            `json:"name" jsonschema:"Session name"`
	Cwd  string            `json:"cwd,omitempty" jsonschema:"Initial working directory (default: the server's)"`
	Env  map[string]string `json:"env,omitempty" jsonschema:"Initial environment variables"`
}

type macListSessionsInput struct{}

type macCloseSessionInput struct {
	Session   string `json:"session" jsonschema:"Session name or ID to close"`
	Processes string `json:"processes,omitempty" jsonschema:"What to do with the session's running background processes: kill (end them all) or transfer (move them to the default session). Without it a session with running processes stays open and the answer lists them"`
}

type macSessionView struct {
	ID                  string              `json:"id"`
	Name                string              `json:"name"`
	Cwd                 string              `json:"cwd"`
	EnvNames            []string            `json:"envNames"`
	Created             string              `json:"created,omitempty"`
	LastUsed            string              `json:"lastUsed,omitempty"`
	BackgroundProcesses int                 `json:"backgroundProcesses"`
	TotalProcesses      int                 `json:"totalProcesses"`
	Resources           macSessionResources `json:"resources"`
	Processes           []macSessionProcess `json:"processes,omitempty"`
	known               bool
}

// macSessionResources is what a session's processes use: cpu and memory
// summed over the running ones (sampled now), cpuTime over all of them.
type macSessionResources struct {
	CPU           float64 `json:"cpu"`
	Memory        float64 `json:"memory"`
	MemoryPercent float64 `json:"memoryPercent"`
	CPUTime       int64   `json:"cpuTime"`
}

type macSessionProcess struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	PID     int    `json:"pid,omitempty"`
	Status  string `json:"status"`
}

func (m *macShell) addSessionTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "create_shell_session", Description: "Create a named session: a working directory and environment that run_background and run_command use (session=name).",
		InputSchema: schemaOf[macCreateSessionInput]("create_shell_session"), Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(false)}}, m.createSession)
	sdk.AddTool(srv, &sdk.Tool{Name: "list_shell_sessions", Description: "List sessions with their working directory, background process count and resource usage (CPU and memory of their running processes).",
		InputSchema: schemaOf[macListSessionsInput]("list_shell_sessions"), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, m.listSessions)
	cs := schemaOf[macCloseSessionInput]("close_session")
	cs.Properties["processes"].Enum = []any{"kill", "transfer"}
	sdk.AddTool(srv, &sdk.Tool{Name: "close_session", Description: "Close a session. A session with running background processes is closed only when processes says what to do with them: kill (end them) or transfer (move them to the default session); without it the answer lists them and nothing changes. The default session cannot be closed.",
		InputSchema: cs, Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}}, m.closeSession)
}

// useSession returns (a copy of) the session named name, "" meaning the
// default; a name not seen before becomes a session in the server's
// directory, as the document's run_background takes any session name.
func (m *macShell) useSession(name string) (macSession, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = macDefaultSession
	}
	if err := checkSessionName(name); err != nil {
		return macSession{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[name]
	if !ok {
		s = &macSession{Name: name, Cwd: m.cwd, Created: time.Now()}
		m.sessions[name] = s
	}
	s.LastUsed = time.Now()
	cp := *s
	cp.Env = make(map[string]string, len(s.Env))
	for k, v := range s.Env {
		cp.Env[k] = v
	}
	return cp, nil
}

func checkSessionName(name string) error {
	if len(name) > jobs.MaxLabelBytes || strings.ContainsAny(name, "\x00\n") {
		return argError("session name \"%s\" is too long or has a NUL or a newline", textclean.Echo(name))
	}
	return nil
}

func (m *macShell) createSession(ctx context.Context, req *sdk.CallToolRequest, in macCreateSessionInput) (*sdk.CallToolResult, any, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return nil, nil, argError("name is required")
	}
	if err := checkSessionName(name); err != nil {
		return nil, nil, err
	}
	cwd := m.cwd
	if in.Cwd != "" {
		abs, err := filepath.Abs(in.Cwd)
		if err != nil {
			return nil, nil, argError("cwd: %v", err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return nil, nil, argError("cwd %s does not exist or is not a directory", textclean.Echo(abs))
		}
		cwd = abs
	}
	for k := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, nil, argError("env: bad variable name \"%s\"", textclean.Echo(k))
		}
	}
	m.mu.Lock()
	if _, ok := m.sessions[name]; ok {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("Error: Session '%s' already exists", textclean.Echo(name))
	}
	s := &macSession{Name: name, Cwd: cwd, Env: map[string]string{}, Created: time.Now(), LastUsed: time.Now()}
	for k, v := range in.Env {
		s.Env[k] = v
	}
	m.sessions[name] = s
	m.mu.Unlock()
	return jsonResult(map[string]any{"sessionId": name, "name": name, "cwd": cwd, "envNames": sortedKeys(s.Env),
		"message": fmt.Sprintf("Created session '%s' with ID: %s\nWorking directory: %s", name, name, cwd)})
}

func sortedKeys(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sessionViews is every session: this server's, and every other that
// has running processes in the scope (a previous server's, the CLI's
// labels), with their processes' counts and usage.
func (m *macShell) sessionViews(ctx context.Context) (map[string]*macSessionView, error) {
	list, err := m.c.List(ctx, jobs.Filter{Limit: macListMax})
	if err != nil {
		return nil, err
	}
	views := map[string]*macSessionView{}
	m.mu.Lock()
	for name, s := range m.sessions {
		views[name] = &macSessionView{ID: name, Name: name, Cwd: s.Cwd, EnvNames: sortedKeys(s.Env),
			Created: stamp(&s.Created), LastUsed: stamp(&s.LastUsed), known: true}
	}
	m.mu.Unlock()
	memTotal, usage := jobs.MemTotalKB(), macUsage(ctx, m.c, list)
	for _, j := range list {
		name := sessionOf(j)
		active := !j.Status.Terminal()
		v, ok := views[name]
		if !ok {
			if !active {
				continue // a closed session's history is not a session
			}
			v = &macSessionView{ID: name, Name: name, Cwd: j.Cwd, EnvNames: []string{}}
			views[name] = v
		}
		v.TotalProcesses++
		r := macResourcesOf(j, usage, memTotal)
		if r != nil {
			v.Resources.CPUTime += r.CPUTime
		}
		if !active {
			continue
		}
		v.BackgroundProcesses++
		v.Processes = append(v.Processes, macSessionProcess{ID: j.ID, Command: j.Command, PID: j.PID, Status: macStatus(j)})
		if r != nil && r.Source == "live" {
			v.Resources.CPU = round1(v.Resources.CPU + r.CPU)
			v.Resources.Memory = round1(v.Resources.Memory + r.Memory)
			v.Resources.MemoryPercent = round1(v.Resources.MemoryPercent + r.MemoryPercent)
		}
	}
	return views, nil
}

func (m *macShell) listSessions(ctx context.Context, req *sdk.CallToolRequest, in macListSessionsInput) (*sdk.CallToolResult, any, error) {
	views, err := m.sessionViews(ctx)
	if err != nil {
		return nil, nil, describe("", err)
	}
	out := struct {
		Sessions []*macSessionView `json:"sessions"`
	}{Sessions: make([]*macSessionView, 0, len(views))}
	for _, v := range views {
		out.Sessions = append(out.Sessions, v)
	}
	// The default session first, then by name.
	sort.Slice(out.Sessions, func(i, k int) bool {
		a, b := out.Sessions[i], out.Sessions[k]
		if (a.Name == macDefaultSession) != (b.Name == macDefaultSession) {
			return a.Name == macDefaultSession
		}
		return a.Name < b.Name
	})
	return jsonResult(out)
}

func (m *macShell) closeSession(ctx context.Context, req *sdk.CallToolRequest, in macCloseSessionInput) (*sdk.CallToolResult, any, error) {
	name := strings.TrimSpace(in.Session)
	switch {
	case name == "":
		return nil, nil, argError("session is required")
	case name == macDefaultSession:
		return nil, nil, fmt.Errorf("Error: Cannot close the default session")
	}
	switch in.Processes {
	case "", "kill", "transfer":
	default:
		return nil, nil, argError("processes must be kill or transfer, got \"%s\"", textclean.Echo(in.Processes))
	}
	views, err := m.sessionViews(ctx)
	if err != nil {
		return nil, nil, describe("", err)
	}
	v, ok := views[name]
	if !ok {
		return nil, nil, fmt.Errorf("Error: Session '%s' not found", textclean.Echo(name))
	}
	running := v.Processes
	if running == nil {
		running = []macSessionProcess{}
	}
	res := map[string]any{"session": name, "runningProcesses": running}
	if len(running) > 0 && in.Processes == "" {
		// The document: "prompt about running background processes;
		// option to kill all or transfer to default session; prevent
		// accidental process orphaning".
		res["closed"] = false
		res["options"] = []string{"kill", "transfer"}
		res["message"] = fmt.Sprintf("Session '%s' has %d running background process(es); it stays open. Call close_session again with processes=\"kill\" to kill them or processes=\"transfer\" to move them to the default session.", name, len(running))
		r, sc, err := jsonResult(res)
		if r != nil {
			r.IsError = true
		}
		return r, sc, err
	}
	var failed []string
	switch in.Processes {
	case "kill":
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for _, p := range running {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := m.c.Kill(ctx, p.ID, 0); err != nil {
					mu.Lock()
					failed = append(failed, p.ID+": "+err.Error())
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	case "transfer":
		for _, p := range running {
			if err := m.c.SetLabel(ctx, p.ID, macDefaultSession); err != nil {
				failed = append(failed, p.ID+": "+err.Error())
			}
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return nil, nil, fmt.Errorf("session %s stays open: %d of its processes could not be handled (%s)", textclean.Echo(name), len(failed), strings.Join(failed, "; "))
	}
	m.mu.Lock()
	delete(m.sessions, name)
	m.mu.Unlock()
	res["closed"] = true
	res["message"] = fmt.Sprintf("Session '%s' closed", name)
	switch {
	case len(running) == 0:
	case in.Processes == "kill":
		res["killed"] = len(running)
	default:
		res["transferred"] = len(running)
		res["message"] = fmt.Sprintf("Session '%s' closed; its %d running background process(es) moved to the default session", name, len(running))
	}
	return jsonResult(res)
}
