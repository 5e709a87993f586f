package proc

// WaitingForInput always reports false on darwin: there is no portable way
// to see which file a blocked process reads.
func WaitingForInput(pid int, stdinPipeInode uint64, t Target) bool { return false }

// MainWaitsForInput always reports false on darwin, as WaitingForInput.
func MainWaitsForInput(pid int, stdinPipeInode uint64) bool { return false }

// MainWaitsOnStdin always reports false on darwin, as WaitingForInput.
func MainWaitsOnStdin(main Info) bool { return false }

// WaitingForTTY always reports false on darwin, as WaitingForInput.
func WaitingForTTY(pid int, t Target) bool { return false }
