// Package tmux drives tmux for jobs that need a terminal: a person can
// attach to watch or take over, and an agent can read the screen and type.
//
// A Server names one tmux server: the user's default one, or a private one
// chosen with Server.Socket. Every command addresses its session exactly,
// as "=name" (and the pane as "=name:"), because tmux otherwise takes a
// target as a prefix or pattern: "jobs-ab" would find "jobs-abc" once
// "jobs-ab" has gone, and a kill meant for one job would end another.
//
// Sessions are created with remain-on-exit, so when the command ends its
// pane stays, dead, and PaneStatus can read the exit status from tmux; the
// caller closes the session with KillSession once it has recorded the end.
// Output is captured as it happens with pipe-pane, set up in the same tmux
// command that creates the session (WithPipe) so that nothing a fast
// command prints is missed.
//
// Commands run with a bounded timeout: a wedged tmux server cannot hang
// the caller. tmux 3.2 or newer is needed (new-session -e).
package tmux
