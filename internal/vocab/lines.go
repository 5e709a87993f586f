package vocab

// FirstLine is the number of a job's first line of output. Every front end
// counts lines from it: first_line in JSON, --from-line, the MCP
// results' line numbers. Storage counts from 0 (a chunk's first_line is
// the number of newlines before it); the conversion happens once, in
// pkg/jobs.
const FirstLine = 1
