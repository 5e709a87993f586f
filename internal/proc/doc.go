// Package proc holds the operating-system process primitives the supervisor
// needs: reading a process's identity from the kernel, finding every process
// of a job, ending them, detecting a job that waits for input, and reaping
// orphans.
//
// A pid alone never identifies a process here. Pids are reused, so every
// process is carried as a pid plus its start time (StartTime), and that pair
// is checked again right before a signal is sent. A zombie counts as dead:
// on machines whose PID 1 does not reap orphans a killed grandchild can stay a
// zombie forever, and it must not look like a survivor.
//
// A job's processes are those proven its own (see Target): every process
// whose environment carries the job's tag (JOBS_ID=<id>), its main process
// with its start time, and the members of its process group that started
// within the job's life, all on the boot it ran in. The tag finds what left
// the group through setsid or a double fork; a process that wipes its own
// environment (env -i) before exec escapes it. Group membership alone proves
// nothing: a group id is reused like a pid.
//
// Linux is the real implementation, read from /proc. On darwin the package
// builds: identity and process groups come from sysctl, and what has no
// equivalent (environment scans, subreaper, input-wait detection) returns
// errors.ErrUnsupported or reports nothing.
package proc
