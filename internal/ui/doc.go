// Package ui serves `jobs ui`: a web view of a jobs database for people
// watching what agents run.
//
// Three pages: the live list of jobs, a job's page (its metadata, status
// history and output, followed live, paged by byte offset, searchable) and a
// timeline (jobs as bars over the last hours, jobs per day by outcome from
// the scope_daily view). Live parts are server-sent events driven by the
// database: a stream looks again when the database's files change (inotify)
// and at least once a second, so it works while no supervisor runs and
// costs one small read a second while nothing happens.
//
// Everything is rendered on the server with html/template; output bytes go
// through a renderer that escapes text and turns SGR colour codes into
// spans, so no byte of a job's output or name becomes markup or runs. The
// server answers only requests that carry its random token in the path,
// name it in the Host header and come from no other origin; control actions
// (kill, signal, stdin; only with AllowControl) must also carry the token
// in a header.
package ui
