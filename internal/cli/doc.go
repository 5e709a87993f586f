// Package cli is the jobs command-line tool: a thin front end over the public
// package github.com/agentjobs/jobs/pkg/jobs.
//
// Every verb validates its arguments before it touches anything, then makes
// one or a few calls on a jobs.Client opened in detached mode (jobs are
// handed to a `jobs supervise` process so they outlive the command), and
// prints the result either for a person (aligned tables, relative times,
// sizes such as "1.2 MiB", colour only on a terminal and never with
// NO_COLOR) or, with --json, as the stable JSON documented in docs/json.md.
//
// Errors are one line on stderr, "jobs: <message>", with exit status 1, or 2
// for usage errors (unknown flag, missing argument, malformed duration,
// regex, signal or size). The exit statuses are listed in exitcodes.go.
//
// urfave/cli parses flags the way Go's flag package does, which stops at
// the first argument that is not a flag. Run first reorders the command
// line (see args.go) so that flags may follow the job id, as in
// `jobs poll 7fq2 --tail 2000`, and global flags may follow the verb.
package cli
