package supervisor

// Test helpers and internals for the external test package
// (supervisor_test), whose tests also need the tmux-pipe helper, which
// imports this package.
var (
	Eventually      = eventually
	ExitCode        = exitCode
	Output          = output
	NewRuntimeDir   = runtimeDir
	StartJob        = start
	StartSupervisor = startSupervisor
	Exe             = testExe
	WaitDone        = waitDone
)
