package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
	ucli "github.com/urfave/cli/v2"
)

func (r *runner) writeCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "write",
		Usage:     "write to a job's stdin",
		ArgsUsage: "ID [DATA | -]",
		Description: "DATA is written as given (add --newline to end it with one, as a prompt needs);\n" +
			"'-' copies this command's stdin. --eof closes the job's stdin afterwards.\n" +
			"A job that takes none of the data for --timeout is not reading: write stops there,\n" +
			"says how many bytes went in, and exits 1 (--eof still closes the stdin).",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "eof", Usage: "close the job's stdin after writing"},
			&ucli.BoolFlag{Name: "newline", Aliases: []string{"n"}, Usage: "append a newline to DATA"},
			&ucli.StringFlag{Name: "timeout", Value: "10s", Usage: "give up when the job takes no input for `DUR` (0: wait as long as it takes)"},
		},
		Action: r.write,
	}
}

func (r *runner) write(cc *ucli.Context) error {
	const verb = "write"
	a := args(cc)
	eof := cc.Bool("eof")
	switch {
	case len(a) == 0:
		return usagef(verb, "missing job id or name")
	case len(a) == 1 && !eof:
		return usagef(verb, "missing DATA: give the text, '-' for stdin, or --eof")
	case len(a) > 2:
		return usagef(verb, "too many arguments: quote DATA as one argument")
	case a[0] == "":
		return usagef(verb, "empty job id")
	}
	timeout, err := parseDuration(verb, "timeout", cc.String("timeout"))
	if err != nil {
		return err
	}
	r.writeTimeout = timeout
	if timeout == 0 {
		r.writeTimeout = jobs.Unlimited // jobs.Options: no bound
	}
	ref := a[0]
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	ctx := cc.Context
	var written int64
	var werr error // the write's failure; an eof is still carried out after ErrNotReading
	put := func(p []byte) bool {
		n, err := c.Write(ctx, ref, p)
		written += int64(n)
		werr = err
		return err == nil
	}
	if len(a) == 2 {
		if a[1] == "-" {
			// Streamed in pieces: neither this process nor the supervisor
			// holds more than one piece of a large input.
			buf := make([]byte, 32<<10)
			for {
				n, rerr := r.stdin.Read(buf)
				if n > 0 && !put(buf[:n]) {
					break
				}
				if errors.Is(rerr, io.EOF) {
					if cc.Bool("newline") {
						put([]byte("\n"))
					}
					break
				}
				if rerr != nil {
					return fmt.Errorf("read stdin: %w", rerr)
				}
			}
		} else {
			data := a[1]
			if cc.Bool("newline") {
				data += "\n"
			}
			put([]byte(data))
		}
	}
	if werr != nil && !errors.Is(werr, jobs.ErrNotReading) {
		return werr
	}
	closed := false
	if eof {
		err := c.CloseStdin(ctx, ref)
		// A job that ends once it has taken all the data (head -c N) may
		// be gone by the close: its stdin is closed, as asked.
		if err != nil && !(errors.Is(err, jobs.ErrNotRunning) && werr == nil && len(a) == 2) {
			return errors.Join(werr, err)
		}
		closed = true
	}
	if jsonOut(cc) {
		res := writeResult{JobID: ref, Bytes: written, EOF: closed, NotReading: werr != nil}
		if err := r.printJSON(res); err != nil {
			return err
		}
	}
	if werr != nil {
		// Counted here: the client's error counts only the last piece.
		msg := fmt.Sprintf("job %s is not reading its stdin: it took %d bytes, then none for %s", ref, written, timeout)
		if closed {
			msg += "; stdin closed"
		}
		return &exitError{code: ExitError, msg: msg}
	}
	return nil
}

// writeResult is the JSON of jobs write.
type writeResult struct {
	JobID string `json:"ref"`
	// Bytes counts what the job took, also when it stopped reading.
	Bytes      int64 `json:"bytes"`
	EOF        bool  `json:"eof"`
	NotReading bool  `json:"not_reading"`
}

func (r *runner) killCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "kill",
		Usage:     "end a job's whole process tree, or send it one signal",
		ArgsUsage: "ID | --all",
		Description: "Sends SIGTERM to the job's process group and every process carrying its JOBS_ID,\n" +
			"waits --grace, then SIGKILL. --signal sends one signal instead (INT, HUP, STOP, CONT, USR1 …).\n" +
			"Killing a finished job is not an error.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "grace", Usage: "time `DUR` between SIGTERM and SIGKILL (default " + shortDuration(jobs.DefaultGrace) + ")"},
			&ucli.StringFlag{Name: "signal", Aliases: []string{"s"}, Usage: "send signal `NAME` only"},
			&ucli.BoolFlag{Name: "all", Usage: "end every running job of the scope"},
		},
		Action: r.kill,
	}
}

func (r *runner) kill(cc *ucli.Context) error {
	const verb = "kill"
	a := args(cc)
	all := cc.Bool("all")
	switch {
	case all && len(a) > 0:
		return usagef(verb, "give a job id or --all, not both")
	case !all && len(a) == 0:
		return usagef(verb, "missing job id or name (or --all)")
	case len(a) > 1:
		return usagef(verb, "one job at a time: %d ids given", len(a))
	case !all && a[0] == "":
		return usagef(verb, "empty job id")
	}
	var grace time.Duration
	if cc.IsSet("grace") {
		d, err := parseDuration(verb, "grace", cc.String("grace"))
		if err != nil {
			return err
		}
		grace = d
		if grace == 0 {
			grace = jobs.NoGrace // the user asked for none; 0 is the default to the API
		}
	}
	sig := ""
	if cc.IsSet("signal") {
		s, err := parseSignal(verb, cc.String("signal"))
		if err != nil {
			return err
		}
		sig = s
		if all {
			return usagef(verb, "--signal works on one job, not with --all")
		}
		if cc.IsSet("grace") {
			return usagef(verb, "--grace is for a kill, not for --signal")
		}
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	ctx := cc.Context
	var results []jobs.KillResult
	if all {
		results, err = c.KillAll(ctx, grace)
	} else {
		// One decision for every front end: TERM and KILL end the job,
		// any other signal is sent once.
		var res jobs.KillResult
		res, err = c.KillSignal(ctx, a[0], sig, grace)
		if err == nil && res.Signal != "" {
			if jsonOut(cc) {
				return r.printJSON(signalResult{Ref: a[0], Signal: res.Signal, Signalled: nonNilInts(res.Signalled)})
			}
			fmt.Fprintf(r.stdout, "sent %s to %s\n", res.Signal, pidList(res.Signalled))
			return nil
		}
		results = []jobs.KillResult{res}
	}
	if err != nil {
		return err
	}
	if jsonOut(cc) {
		if all {
			if err := r.printJSON(results); err != nil {
				return err
			}
		} else if err := r.printJSON(results[0]); err != nil {
			return err
		}
	} else {
		if all && len(results) == 0 {
			fmt.Fprintln(r.stdout, "no running jobs")
		}
		for _, res := range results {
			fmt.Fprintln(r.stdout, formatKill(res))
		}
	}
	var survivors []int
	for _, res := range results {
		survivors = append(survivors, res.Survivors...)
	}
	if len(survivors) > 0 {
		return &exitError{code: ExitError, msg: fmt.Sprintf("%s survived SIGKILL: %s", plural(int64(len(survivors)), "process", "processes"), pidList(survivors))}
	}
	return nil
}

func (r *runner) pauseCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "pause",
		Usage:     "stop a job's processes (SIGSTOP) until resume",
		ArgsUsage: "ID",
		Description: "Stops the job's process group and every process carrying its JOBS_ID. The job stays\n" +
			"running and shows as stopped; its timeout keeps counting, and kill still ends it.",
		Action: func(cc *ucli.Context) error { return r.pauseResume(cc, "pause", "STOP") },
	}
}

func (r *runner) resumeCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "resume",
		Usage:       "continue a paused job (SIGCONT)",
		ArgsUsage:   "ID",
		Description: "Continues the job's process group and every process carrying its JOBS_ID.",
		Action:      func(cc *ucli.Context) error { return r.pauseResume(cc, "resume", "CONT") },
	}
}

// pauseResume runs pause or resume: verb names the command, sig the signal.
func (r *runner) pauseResume(cc *ucli.Context, verb, sig string) error {
	a := args(cc)
	switch {
	case len(a) == 0:
		return usagef(verb, "missing job id or name")
	case len(a) > 1:
		return usagef(verb, "one job at a time: %d ids given", len(a))
	case a[0] == "":
		return usagef(verb, "empty job id")
	}
	c, err := r.client(cc)
	if err != nil {
		return err
	}
	var pids []int
	if verb == "pause" {
		pids, err = c.Pause(cc.Context, a[0])
	} else {
		pids, err = c.Resume(cc.Context, a[0])
	}
	if err != nil {
		return err
	}
	if jsonOut(cc) {
		return r.printJSON(signalResult{Ref: a[0], Signal: sig, Signalled: nonNilInts(pids)})
	}
	done := map[string]string{"pause": "stopped", "resume": "continued"}[verb]
	fmt.Fprintf(r.stdout, "%s %s\n", done, pidList(pids))
	return nil
}

// signalResult is the JSON of kill --signal, pause and resume.
type signalResult struct {
	Ref       string `json:"ref"`
	Signal    string `json:"signal"`
	Signalled []int  `json:"signalled"`
}

// formatKill says what a kill did, in one line.
func formatKill(res jobs.KillResult) string {
	if res.AlreadyDone && len(res.Signalled) == 0 {
		return fmt.Sprintf("%s had already ended (%s)", res.JobID, res.Status)
	}
	s := fmt.Sprintf("%s %s: signalled %s", res.JobID, res.Status, pidList(res.Signalled))
	if res.Escalated {
		s += "; needed SIGKILL after the grace period"
	}
	if res.Unreached != "" {
		s += "; " + res.Unreached
	}
	return s
}

func pidList(pids []int) string {
	if len(pids) == 0 {
		return "no process"
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = fmt.Sprint(p)
	}
	return plural(int64(len(pids)), "process", "processes") + " (" + strings.Join(s, " ") + ")"
}

func nonNilInts(a []int) []int {
	if a == nil {
		return []int{}
	}
	return a
}
