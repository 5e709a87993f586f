// Package vocab is the vocabulary every layer of jobs speaks: the statuses
// of a job, the sentinel errors (and the typed errors that carry details),
// how an error crosses a supervisor's socket, what a kill did, the signal
// table, where line numbers start and when to poll again.
//
// It is a leaf: it imports only the standard library, so the engine
// (internal/db, internal/logs, internal/supervisor, internal/proc) and the
// front ends (pkg/jobs, internal/cli, internal/mcp, internal/ui) all use
// the same declarations. pkg/jobs re-exports them with type aliases, so an
// error returned three layers down still matches errors.Is(err,
// jobs.ErrNotFound), in the same process or after crossing the socket.
package vocab
