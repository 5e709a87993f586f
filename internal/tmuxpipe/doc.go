// Package tmuxpipe holds the two helper processes that tmux runs for every
// tmux job, so that a tmux job needs no supervisor once it is started:
//
//   - Run is `jobs tmux-pipe`, which tmux starts with pipe-pane in the
//     command that creates the job's session: it appends the pane's output
//     as stream pty, enforces the timeout, and records the job's end (with
//     tmuxjob.ReadEnd and tmuxjob.Finish, which also run the
//     job's on-exit command);
//   - Exec is `jobs tmux-exec`, the pane's first command: it takes the
//     job's environment from a private file rather than from tmux's
//     command line, which every user can read, and execs the job's
//     command.
//
// The supervisor starts tmux jobs and the CLI hosts the two verbs; this
// package acts on the job through package tmuxjob, as a kill from any
// process does, and needs no supervisor.
package tmuxpipe
