package textclean

// CleanLine is Clean for one line (without its newline) as bytes: the
// text a reader of cleaned output is shown for it, which patterns that
// search cleaned output are matched against.
func CleanLine(b []byte) []byte { return []byte(Clean(b)) }
