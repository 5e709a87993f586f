package logs

// Totals are what the appender has counted of a job's output: every byte
// and newline the job wrote, stored or not.
type Totals struct {
	Bytes, Lines int64
}

// Totals returns the counts of a tracked job, and false for a job it does
// not track.
func (a *Appender) Totals(jobID string) (Totals, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.jobs[jobID]
	if !ok {
		return Totals{}, false
	}
	return Totals{Bytes: st.off, Lines: st.lines}, true
}
