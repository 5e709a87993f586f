// Package tmuxjob acts on tmux jobs from any process, with or without a
// supervisor.
//
// A tmux job runs in its own session, "jobs-<id>", on the user's default
// tmux server (or the private one EnvSocket names). A supervisor only
// creates it. Everything after that is done by processes that do not need
// the supervisor, so a tmux job survives its supervisor dying:
//
//   - the tmux-pipe helper (package tmuxpipe), which tmux itself starts with
//     pipe-pane in the same command that creates the session, appends the
//     pane's output as stream pty, enforces the timeout, reads the exit
//     status once the pane is dead (ReadEnd), records the final status
//     (Finish) and closes the session;
//   - kill, signal, write and send-keys act through tmux and /proc, from
//     whichever process asks (Kill, Signal, Write, SendKeys);
//   - a sweep leaves a tmux job alone while its session exists (Alive),
//     and marks it lost once the session is gone.
//
// The stop intent of a kill or timeout is stored in the job's row
// (db.RequestStop) before the processes are signalled, because the killer
// and the helper that records the exit are different processes.
package tmuxjob
