package vocab

// maxSignal is the highest signal number on darwin (NSIG-1).
const maxSignal = 31
