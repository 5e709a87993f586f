package jobs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// tempDB returns a database path in a fresh directory and a function that
// removes it.
func tempDB() (string, func()) {
	dir, err := os.MkdirTemp("", "jobs-example-")
	if err != nil {
		log.Fatal(err)
	}
	return filepath.Join(dir, "jobs.db"), func() { os.RemoveAll(dir) }
}

// Start a command, wait for it, read its output.
func Example() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()

	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	j, err := c.Start(ctx, jobs.Spec{Command: "echo hello; echo world >&2; exit 3"})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Wait(ctx, []string{j.ID}, jobs.WaitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	done := res.Jobs[0]
	fmt.Println(done.Status, *done.ExitCode)

	out, err := c.Log(ctx, j.ID, jobs.Range{Stream: jobs.Stdout})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out.Text)
	// Output:
	// failed 3
	// hello
}

// Start a development server and wait until it says it is ready, without
// polling.
func ExampleClient_Wait_untilReady() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()

	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	srv, err := c.Start(ctx, jobs.Spec{
		Name:    "dev-server",
		Command: "echo compiling; sleep 0.2; echo 'listening on :8080'; exec sleep 60",
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Wait(ctx, []string{"dev-server"}, jobs.WaitOptions{Until: "listening on"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Reason, res.Match)

	k, err := c.Kill(ctx, srv.ID, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(k.Status, len(k.Survivors))
	// Output:
	// matched listening on :8080
	// killed 0
}

// Be told when jobs finish: the event stream carries every transition once.
func ExampleClient_Events() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	c, err := jobs.Open(ctx, jobs.Options{DB: path, Scope: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	j, err := c.Start(ctx, jobs.Spec{Command: "exit 0"})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range c.Events(ctx, jobs.EventOptions{Follow: true}) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.JobID != j.ID || ev.Kind != "transition" {
			continue
		}
		fmt.Printf("%s -> %s\n", ev.From, ev.To)
		if ev.To.Terminal() {
			break
		}
	}
	// Output:
	//  -> starting
	// starting -> running
	// running -> done
}

// Be called back when a job this program supervises ends.
func ExampleOptions_onExit() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()

	ended := make(chan jobs.Job, 1)
	c, err := jobs.Open(ctx, jobs.Options{
		DB:     path,
		Scope:  "example",
		OnExit: func(j jobs.Job) { ended <- j },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Start(ctx, jobs.Spec{Argv: []string{"sh", "-c", "exit 7"}}); err != nil {
		log.Fatal(err)
	}
	j := <-ended
	fmt.Println(j.Status, *j.ExitCode)
	// Output:
	// failed 7
}
