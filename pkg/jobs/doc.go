// Package jobs runs shell commands as durable background jobs and keeps
// everything about them — metadata, every status transition and all output
// as paginated chunks — in one SQLite database.
//
// It is the one API of the project: the jobs command-line tool and its MCP
// server are thin callers of it, and Go programs embed it directly.
//
// Open a Client for a database and a scope, Start jobs, then read them
// without holding anything open: Poll, ReadNew, Log, List, Wait and Events
// read the database, so they work across restarts and from other processes.
//
// Two modes sit behind the same API. In-process (the default), the client
// supervises its own children with runner goroutines and a janitor, and
// Close ends them cleanly, recording why. Detached (Options.Detached), jobs
// are handed to a `jobs supervise` process so they outlive the program. Both
// write the same database that the CLI and sqlite3 read.
package jobs
