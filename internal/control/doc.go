// Package control is the one place that decides whose processes a job's
// are and what happened when they were signalled. Every front end and
// every engine path that ends or signals a job's processes goes through
// it: the supervisor's kill, timeout and failed start, the janitor's lost
// jobs, a tmux job's kill and timeout, and pkg/jobs for a job no live
// supervisor answers for (lost, finished with leftovers, or owned by a
// supervisor that does not answer).
//
// It decides, in this order:
//
//   - what a kill asks for (Plan): end the job (SIGTERM, a grace period,
//     SIGKILL) or send one signal, from a signal given by name or number
//     ("TERM", "SIGKILL", "9" …) and a grace period (Grace: 0 the
//     default, vocab.NoGrace none, any other negative invalid);
//   - membership (Target): the job's row (its main process with its start
//     time, its group, its boot, its JOBS_ID tag), its cgroup where it has
//     one, and what is never signalled (Guard: the caller and every live
//     supervisor, with their groups); package proc proves each process;
//   - the signalling and the escalation (End, Send): SIGTERM and SIGCONT,
//     the grace period, SIGKILL, a bounded wait;
//   - the one result (vocab.KillResult): the pids signalled and those that
//     survived, whether SIGKILL was needed, and whether the job had already
//     finished (AlreadyDone: it was terminal, lost included, before the
//     kill; Signalled still lists what it left behind and was ended).
package control
