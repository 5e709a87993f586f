package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

//go:embed assets
var assets embed.FS

// Config is what a Server shows and allows.
type Config struct {
	// Client reads the database; its scope is the one shown unless
	// AllScopes. Control actions go through it (or a client of the job's
	// scope opened the same way, see OpenScope).
	Client *jobs.Client
	// OpenScope opens a client of another scope on the same database, for
	// the jobs of other scopes when AllScopes is set.
	OpenScope func(ctx context.Context, scope string) (*jobs.Client, error)
	// AllScopes lists every scope's jobs.
	AllScopes bool
	// AllowControl adds kill, signal and stdin actions.
	AllowControl bool
	// Grace is the time between SIGTERM and SIGKILL of a kill (0: the
	// client's default).
	Grace time.Duration
	// Token is the secret every request's path starts with; empty means
	// a random one.
	Token string
}

// Server serves the web view. Every request must carry the token as the
// first segment of its path, name this server in its Host header (an IP
// literal or localhost, with the port listened on), and come from no other
// origin; control actions must also carry the token in the X-Jobs-Token
// header, which a page of another origin cannot set without a preflight
// that this server never grants.
type Server struct {
	cfg      Config
	port     string
	loopback bool
	tmpl     *template.Template
	mux      *http.ServeMux
	css      string

	mu      sync.Mutex
	clients map[string]*jobs.Client // other scopes' clients (AllScopes)

	looks atomic.Int64 // reads of the event streams, for tests of their cost
}

// New returns a server for the listener ln (whose port the Host header must
// name).
func New(cfg Config, ln net.Listener) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("new web view: no client")
	}
	if cfg.Token == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("make token: %w", err)
		}
		cfg.Token = base64.RawURLEncoding.EncodeToString(b)
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return nil, fmt.Errorf("new web view: %w", err)
	}
	ip := net.ParseIP(host)
	s := &Server{
		cfg:      cfg,
		port:     port,
		loopback: ip != nil && ip.IsLoopback(),
		clients:  map[string]*jobs.Client{},
	}
	s.tmpl, err = template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse templates: %w", err)
	}
	css, err := fs.ReadFile(assets, "assets/app.css")
	if err != nil {
		return nil, fmt.Errorf("read stylesheet: %w", err)
	}
	s.css = string(css) + paletteCSS()
	s.routes()
	return s, nil
}

// Token is the secret in the server's URLs.
func (s *Server) Token() string { return s.cfg.Token }

// base is the path prefix of every page: the token.
func (s *Server) base() string { return "/" + s.cfg.Token }

// Serve serves on ln until ctx ends, then closes the server (open event
// streams end with ctx) and the clients it opened.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
		<-done
	case err = <-done:
	}
	s.closeClients()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) closeClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.clients {
		_ = c.Close()
		delete(s.clients, k)
	}
}

// client returns the client for the jobs of scope.
func (s *Server) client(ctx context.Context, scope string) (*jobs.Client, error) {
	if scope == "" || scope == s.cfg.Client.Scope() {
		return s.cfg.Client, nil
	}
	if !s.cfg.AllScopes || s.cfg.OpenScope == nil {
		return nil, jobs.ErrNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[scope]; ok {
		return c, nil
	}
	c, err := s.cfg.OpenScope(ctx, scope)
	if err != nil {
		return nil, err
	}
	s.clients[scope] = c
	return c, nil
}

// ServeHTTP checks every request before any handler sees it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !s.hostOK(r.Host) {
		http.Error(w, "jobs ui: unknown host "+clip(r.Host), http.StatusMisdirectedRequest)
		return
	}
	if !s.originOK(r) {
		http.Error(w, "jobs ui: cross-origin request refused", http.StatusForbidden)
		return
	}
	rest, ok := s.stripToken(r.URL.Path)
	if !ok {
		http.Error(w, "jobs ui: missing or wrong token in the URL (use the URL jobs ui printed)", http.StatusForbidden)
		return
	}
	if rest == "" {
		http.Redirect(w, r, s.base()+"/", http.StatusFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.actionOK(r) {
		http.Error(w, "jobs ui: action refused: it must come from this page", http.StatusForbidden)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = rest
	r2.URL.RawPath = ""
	s.mux.ServeHTTP(w, r2)
}

// hostOK accepts a Host header naming this server: an IP literal or
// localhost, with the port listened on. A DNS name, which a rebinding attack
// needs, is refused. A loopback server accepts loopback addresses only.
func (s *Server) hostOK(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != s.port {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	return !s.loopback || ip.IsLoopback()
}

// originOK refuses a request that a browser marks as coming from another
// site or origin.
func (s *Server) originOK(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// actionOK is the check of a request that changes something: it must name
// its origin (browsers always do on POST) and carry the token in a header,
// which only a script of this origin can set.
func (s *Server) actionOK(r *http.Request) bool {
	if r.Header.Get("Origin") != "http://"+r.Host {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Jobs-Token")), []byte(s.cfg.Token)) == 1
}

// stripToken checks that path starts with "/TOKEN" and returns the rest.
func (s *Server) stripToken(path string) (string, bool) {
	if !strings.HasPrefix(path, "/") {
		return "", false
	}
	first, rest, _ := strings.Cut(path[1:], "/")
	if subtle.ConstantTimeCompare([]byte(first), []byte(s.cfg.Token)) != 1 {
		return "", false
	}
	if rest == "" && !strings.HasSuffix(path, "/") {
		return "", true
	}
	return "/" + rest, true
}

// clip shortens what a request sent before it is echoed.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
