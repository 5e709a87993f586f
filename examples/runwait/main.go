// Command runwait shows how a Go agent embeds jobs: it starts a shell
// command as a job, waits up to a yield window, and either prints the result
// or leaves the job running (detached, so it outlives this program) and
// prints its id for a later `jobs poll`.
//
//	go run ./examples/runwait -yield 5s 'make test'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

func main() {
	yield := flag.Duration("yield", 10*time.Second, "how long to wait before handing the job over")
	detached := flag.Bool("detached", true, "hand the job to a `jobs supervise` process so it outlives this program")
	scope := flag.String("scope", "", "scope of the job (default $JOBS_SCOPE or \"default\")")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: runwait [-yield DUR] [-detached=false] COMMAND")
		os.Exit(2)
	}
	if err := run(strings.Join(flag.Args(), " "), *yield, *detached, *scope); err != nil {
		fmt.Fprintln(os.Stderr, "runwait:", err)
		os.Exit(1)
	}
}

func run(command string, yield time.Duration, detached bool, scope string) error {
	ctx := context.Background()
	c, err := jobs.Open(ctx, jobs.Options{Detached: detached, Scope: scope})
	if err != nil {
		return err
	}
	defer c.Close()

	j, err := c.Start(ctx, jobs.Spec{Command: command, Label: "runwait"})
	if err != nil {
		return err
	}
	res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{Timeout: yield})
	if err != nil {
		return err
	}
	if res.Reason == jobs.WaitTimedOut {
		fmt.Printf("%s still running; check in with: jobs poll %s --new\n", j.ID, j.ID)
		return nil
	}
	out, err := c.Log(ctx, j.ID, jobs.Range{Tail: 2000, Clean: true})
	if err != nil {
		return err
	}
	done := res.Jobs[0]
	fmt.Print(out.Text)
	if out.OmittedBefore > 0 {
		fmt.Printf("[%d earlier bytes: jobs log %s]\n", out.OmittedBefore, j.ID)
	}
	fmt.Printf("%s %s", j.ID, done.Status)
	if done.ExitCode != nil {
		fmt.Printf(" (exit %d)", *done.ExitCode)
	}
	fmt.Println()
	return nil
}
