// Package mcp serves jobs over the Model Context Protocol on stdio, so that
// agents in any language can start and follow durable background jobs.
//
// It is a thin front end over pkg/jobs: every tool call turns into one or a
// few calls of a jobs.Client, and the client's scope is the server's one
// scope. Two tools mirror the agent tools jobs grew from:
//
//   - execute_command starts a shell command. It waits up to yieldMs for it
//     to finish and returns the result, or returns {status: "running",
//     sessionId} so the agent can carry on and come back later.
//   - process acts on a job by sessionId: list, poll, log, status, write,
//     send_keys, capture, kill, clear, remove, wait.
//
// Every result carries structured content (JSON) and a short text line for
// the model, is bounded, and says what it left out and how to read it.
// Errors are tool errors worded as in the seeds ("Session X not found",
// "Session X is not running", "Session X stdin is not available"), and the
// server keeps serving after any bad input, including malformed JSON-RPC
// frames (answered with a JSON-RPC parse error instead of a hang-up).
//
// The server remembers one thing per job between calls: how long poll has
// seen nothing change, from which it suggests retry_in_ms. Everything else
// lives in the database, so jobs started through one server process are
// polled and read through the next one.
package mcp
