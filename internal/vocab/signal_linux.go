package vocab

// maxSignal is the highest signal number: Linux has real-time signals up to
// SIGRTMAX, 64.
const maxSignal = 64
