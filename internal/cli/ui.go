package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/agentjobs/jobs/internal/ui"
	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) uiCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "ui",
		Usage: "serve a live web view of the jobs on the loopback interface and print its URL",
		Description: "The URL carries a random token that every request must present. Only loopback\n" +
			"addresses are served unless --allow-remote; the Host header must name the server\n" +
			"and requests from other origins are refused. The view is read-only unless\n" +
			"--allow-control, which adds kill, signal and stdin buttons. It reads the database\n" +
			"directly and starts no supervisor to read.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "addr", Value: "127.0.0.1:0", Usage: "listen on `HOST:PORT` (port 0: any free port)"},
			&ucli.BoolFlag{Name: "all-scopes", Usage: "show every scope's jobs"},
			&ucli.BoolFlag{Name: "allow-control", Usage: "add kill, signal and stdin buttons"},
			&ucli.BoolFlag{Name: "allow-remote", Usage: "allow --addr to be a non-loopback address (anyone with the URL can read the jobs)"},
			&ucli.StringFlag{Name: "grace", Usage: "time `DUR` between SIGTERM and SIGKILL of the kill button (default " + shortDuration(jobs.DefaultGrace) + ")"},
		},
		Action: r.ui,
	}
}

func (r *runner) ui(cc *ucli.Context) error {
	const verb = "ui"
	if cc.Args().Present() {
		return usagef(verb, "ui takes no arguments")
	}
	addr := cc.String("addr")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef(verb, "bad --addr %q: want HOST:PORT", clipArg(addr))
	}
	if !cc.Bool("allow-remote") && !loopbackHost(host) {
		return usagef(verb, "--addr %s is not a loopback address: add --allow-remote to serve it (anyone who has the URL can then read the jobs)", clipArg(addr))
	}
	var grace time.Duration
	if v := cc.String("grace"); v != "" {
		if grace, err = parseDuration(verb, "grace", v); err != nil {
			return err
		}
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	exe, _ := os.Executable()
	srv, err := ui.New(ui.Config{
		Client:       c,
		AllScopes:    cc.Bool("all-scopes"),
		AllowControl: cc.Bool("allow-control"),
		Grace:        grace,
		OpenScope: func(ctx context.Context, scope string) (*jobs.Client, error) {
			return jobs.Open(ctx, jobs.Options{DB: c.DBPath(), Scope: scope, Detached: true, Executable: exe})
		},
	}, ln)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "http://%s/%s/\n", ln.Addr().String(), srv.Token())
	if f := r.stdoutFile(); f != nil {
		_ = f.Sync()
	}
	return srv.Serve(cc.Context, ln)
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clipArg shortens user input before it is echoed in an error.
func clipArg(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
