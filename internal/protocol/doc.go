// Package protocol is how a process reaches a supervisor in another
// process: where supervisors live, what they are told and the client that
// tells them.
//
// Where: a database's runtime directory (DefaultRuntimeDir: private, 0700,
// under $XDG_RUNTIME_DIR, else next to the database) holds each
// supervisor's <id>.sock and <id>.lock, and the detached supervisor's
// default.sock, default.lock and supervise.log (SupervisorLogName). A
// supervisor holds its lock for its whole life, so SupervisorAlive tells a
// live one from a dead one. Nothing of another user's is followed, dialled
// or locked: PrepareRuntimeDir, LockFile and the dialers refuse symlinks,
// foreign owners and modes that are not private.
//
// What: one JSON Request per line, answered by one JSON Response per line,
// in order, on the same connection. StartRequest is the start of a job;
// errors travel as vocab.WireError, so errors.Is works across the socket.
//
// The client: Conn, from Dial (a supervisor's own socket), DialDefault
// (the default supervisor, without a round trip of its own) or
// EnsureDefault (which starts `jobs supervise` when nobody answers). Its
// methods mirror the supervisor's, with the same sentinel errors.
//
// The server side is package supervisor, which imports this one.
package protocol
