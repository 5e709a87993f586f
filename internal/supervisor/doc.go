// Package supervisor runs jobs: the one place that owns live child
// processes.
//
// A Supervisor is composed of services with one start and stop contract
// (package startstop), each owning its fields and its goroutines: the
// addresses (locks, supervisors row, sockets), the hooks, the runners, the
// janitor, the queue, the socket server and the file watch. Open starts
// them in that order; Close refuses new work, ends the supervisor's jobs,
// then stops them in reverse, each waiting for its goroutines.
//
// The runners service runs one runner goroutine per job. The runner reads
// the job's stdout and stderr pipes into the shared logs.Appender, waits for
// the main process, drains the pipes with a bounded wait (a grandchild that
// keeps the pipe open must not keep the job running), and records the final
// status with its exit code and resource usage through db.Transition. The
// janitor marks the jobs of dead supervisors lost, deletes expired jobs and
// old events (package sweep, which needs no supervisor).
//
// Every live supervisor holds an exclusive flock on <runtime>/<id>.lock for
// its whole life, so any process can tell a dead supervisor by trying the
// lock (protocol.SupervisorAlive) and mark its jobs lost (sweep.Lost). The
// runtime directory is private (0700); its place and checks are package
// protocol's (protocol.DefaultRuntimeDir).
//
// The supervisor serves its unix socket (<id>.sock, mode 0600): it checks
// each connecting process's uid, then answers protocol.Request with
// protocol.Response; protocol.Conn is the client. The detached supervisor
// that the CLI starts on first need (`jobs supervise`, see RunDetached and
// protocol.EnsureDefault) also holds <runtime>/default.lock and serves
// <runtime>/default.sock, the well-known address; it exits by itself after
// a quiet period with no running job.
//
// tmux jobs (tmux.go) are only created by a supervisor; their tmux-pipe
// helper (package tmuxpipe) captures their output and records their end,
// through tmuxjob.ReadEnd and tmuxjob.Finish, which a kill also uses when the
// helper is gone. Kill, signal, send-keys and capture of a tmux job work
// from any process (package tmuxjob).
//
// Children run in their own process group with JOBS_ID=<id> in their
// environment, so kill and timeout reach the whole tree, even processes that
// left the group (see package proc). The supervisor makes itself a child
// subreaper and reaps the orphans it inherits, so a killed grandchild does
// not linger as a zombie.
package supervisor
