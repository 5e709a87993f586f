// Package mcp serves jobs over the Model Context Protocol on stdio, so that
// agents in any language can start and follow durable background jobs.
//
// It is a thin front end over pkg/jobs: every tool call turns into one or a
// few calls of a jobs.Client, and the client's scope is the server's one
// scope. Three tools mirror the agent tools jobs grew from:
//
//   - execute_command starts a shell command (bash -c when bash is
//     installed). It waits up to yieldMs for it to finish and returns the
//     result, returns at once when the command waits for input, or returns
//     {status: "running", sessionId} so the agent can carry on.
//   - process follows, talks to and ends a job by sessionId: wait (one or
//     several sessions), poll, log, list, status, write, send_keys,
//     capture, kill, clear, remove, pause, resume.
//   - kill_process ends (kill), empties (clear) or deletes (remove) a job:
//     process's three destructive actions alone, for clients that ask
//     before each destructive call.
//
// Output past 10 KB is also offloaded to a file beside the database
// (sessions/<scope>/bgexec_<sessionId>.log), kept current by mirror.go,
// as the OpenClaw documents promise; the database stays the record.
//
// No call blocks past a bound below common clients' request timeouts (50 s,
// EnvCallBound); one that reaches it returns the session's status and says
// to call wait again. Every result is a short text line, then the job's
// cleaned output as plain text when there is some; offsets and counts are
// structured content only, under a declared output schema. Results are
// bounded and say what they left out and how to read it. A parameter that
// does not apply to the action is an error naming those that do. Errors
// are tool errors worded as in the original interfaces ("Session X not found", "Session X
// is not running", "Session X stdin is not available"), and the server
// keeps serving after any bad input: a malformed JSON-RPC frame is answered
// with a JSON-RPC error (with its id when it can be read, also for a frame
// over the size limit), and a cancelled request is not answered. A request
// id comes back byte for byte as the client wrote it (past int64, past
// float64's integers, any spelling). A JSON-RPC batch is answered: in full
// on a session of protocol 2025-03-26 or earlier, which has batches, and
// otherwise with an Invalid Request error for each request in it.
//
// Other profiles serve the other seed documents' tools over the same
// engine (profile.go); each document is its profile's specification. The
// duragent profile (duragent.go, duragent_files.go) is described row by
// row in docs/profiles/duragent.md.
//
// The server remembers one thing per job between calls: how many polls in a
// row saw its state unchanged, from which (with the job's age) it suggests
// retry_in_ms. Everything else
// lives in the database, so jobs started through one server process are
// polled and read through the next one.
package mcp
