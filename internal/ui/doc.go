// Package ui serves `jobs ui`: a web view of a jobs database for people
// watching what agents run.
//
// Three pages: the live list of jobs (filtered by status or text and
// sorted, by query parameters: listquery.go), a job's page (its output
// first, each line numbered and linked as #L<n>, followed live, paged by
// byte offset or opened at a line, searched over the whole retained output
// with every match counted and listed by line: search.go; its metadata and
// status history folded below) and a timeline (jobs as bars over the last
// hours, jobs per day by outcome from the scope_daily view). A running job
// whose processes are stopped is shown paused. Errors of pages are pages. Live parts are server-sent events driven by the
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
