#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive
# (tmux, sqlite3, python3, chromium when missing), runs every package under
# the race detector but the end-to-end tests, which drive the jobs binary
# as users build it and run beside them, and the check of `jobs mcp` with a
# real third-party MCP client (when node is present). With the long sizes
# (CI=true or JOBS_TEST_LONG=1: internal/testlong) the adversarial cases run
# larger, and a short run of every fuzz target comes after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began, in seconds from the start.
step() { echo "== $* (at ${SECONDS}s)"; }

# Three steps run in the background (deps.sh, the inspector check, the
# race run); a run that ends early (a failed build, a failed test)
# stops whichever of them still runs, and removes the scratch directory
# either way.
bin=$(mktemp -d)
cleanup() {
	local pid
	for pid in $(jobs -p); do # those not waited for yet, and their children
		pkill -P "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
	done
	rm -rf "$bin"
	echo "== done in ${SECONDS}s"
}
trap cleanup EXIT

# waitfor PID LOG WHAT: waits for a background step, prints its output,
# and fails the run with its exit status.
waitfor() {
	local rc=0
	wait "$1" || rc=$?
	cat "$2"
	if [ "$rc" != 0 ]; then
		echo "$3 failed (exit $rc)" >&2
		exit "$rc"
	fi
}

# What the tests drive is installed (scripts/deps.sh: packages, the MCP
# clients' node modules, litestream for the long run) while the jobs
# binary builds below: both wait on the network and the disk as much as on
# the CPU.
scripts/deps.sh >"$bin/deps.log" 2>&1 &
deps=$!

# The long adversarial sizes (internal/testlong): on in CI (CI=true) or
# with JOBS_TEST_LONG=1; off, the same cases run smaller.
long=0
if [ "${CI:-}" = true ] || [ "${JOBS_TEST_LONG:-}" = 1 ]; then
	long=1
	step "long sizes on"
else
	step "long sizes off (JOBS_TEST_LONG=1 turns them on, as CI does)"
fi

# One jobs binary for every package whose tests run it (each links it
# into its own directory, internal/testbin), instead of one build each,
# built as the README builds it: static, without the CLI library's doc
# generator, which starts about a quarter faster, and the tests run it
# thousands of times.
#
# The end-to-end tests (e2e) drive that binary as users run it, with real
# processes, sockets, tmux, MCP clients and a browser: their own test
# binary is built as the jobs binary is, without the race detector, and
# doubles as their helper processes (output floods, signal traps, an
# embedding program). The library code they call in-process runs under
# the race detector in pkg/jobs' own tests. Race-built, the harness and
# each of its two hundred helpers would cost several times the CPU. It is
# built first: it compiles every package the jobs binary needs, with the
# same flags, so the jobs build after it only links, and both test runs
# below start together.
step "build the end-to-end tests and jobs (scripts/deps.sh beside them)"
CGO_ENABLED=0 go test -c -vet=off -tags urfave_cli_no_docs -o "$bin/e2e.test" ./e2e
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/jobs" .
export JOBS_TEST_BINARY=$bin/jobs
waitfor "$deps" "$bin/deps.log" scripts/deps.sh

# A program built with the race detector sleeps a second before it exits
# with status 0 (GORACE's atexit_sleep_ms, 1000 by default): every test
# binary, and every job or helper one of them starts, would.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"

# The MCP inspector check drives the built binary on a database of its
# own: it runs beside the Go tests, and its result is read after them.
inspector=""
if command -v npx >/dev/null; then
	step "MCP inspector check (beside the Go tests)"
	scripts/mcp-inspector-check.sh "$JOBS_TEST_BINARY" >"$bin/inspector.log" 2>&1 &
	inspector=$!
else
	echo "== MCP inspector check skipped: node/npx not installed"
fi

# Every package but the end-to-end tests, under the race detector, in the
# background: its compilation and runs take longest, and the end-to-end
# tests below run beside them.
# -parallel 8: several tests of a package wait on processes and sockets
# at once.
# -vet=off: go test would run a subset of go vet on every package first,
# which on a fresh machine (nothing cached) costs about 85 s of CPU, a
# quarter of compiling the tests; vet is a check of its own, which CI runs
# whole (.ci/run: go vet ./...) before this script.
# -gcflags …=-race=false: SQLite and the C library under it are C
# translated to Go (modernc.org/sqlite/lib, modernc.org/libc, memory,
# mathutil), every pointer step an unsafe one; instrumented, each step
# costs a race check and a checkptr check (-race implies -d=checkptr),
# half the CPU of every test that touches a database, and checks C that
# is not ours, whose threads are SQLite's own mutexes. The driver
# (modernc.org/sqlite), database/sql and all our code stay instrumented,
# so a race in how we use a connection is still one the detector sees.
# -ldflags=-w: the test binaries are linked without DWARF, a quarter of
# each link's CPU; race reports and panics name files and lines from the
# binary's own line table, which stays.
# -p 4, and the longest packages named first: go test builds and runs
# packages in the order they are named, at most -p at a time (the number
# of cores by default). Most of a package's test time is spent waiting
# on the processes, sockets and disk of its tests, and on a busy machine
# the last package to start set the end: with two at a time and the
# longest ones started last, the race run went on for a minute or two
# after the end-to-end tests had finished.
norace="-race=false"
mod=$(go list -m)
first=$(for p in internal/cli internal/mcp internal/supervisor pkg/jobs internal/logs internal/proc; do echo "$mod/$p"; done)
pkgs=$(echo "$first"; go list ./... | grep -v '/e2e$' | grep -vxF "$first")
step "go test -race -vet=off -count=1 -p 4 -parallel 8 -timeout 60m -ldflags=-w, every package but e2e (SQLite's translated C uninstrumented; beside the end-to-end tests)"
# shellcheck disable=SC2086 # one argument per package
go test -race -vet=off -count=1 -p 4 -parallel 8 -timeout 60m -ldflags=-w \
	-gcflags="modernc.org/sqlite/lib=$norace" \
	-gcflags="modernc.org/libc/...=$norace" \
	-gcflags="modernc.org/memory=$norace" \
	-gcflags="modernc.org/mathutil=$norace" \
	$pkgs >"$bin/race.log" 2>&1 &
race=$!

# The end-to-end tests, from the binary built above. -parallel 8: most of
# them wait on processes, sockets and the disk more than they compute, so
# more of them than cores run at once.
step "end-to-end tests: e2e.test -test.parallel 8 (beside the race run)"
start=$SECONDS
if (cd e2e && JOBS_TEST_HELPER=$bin/e2e.test "$bin/e2e.test" -test.count=1 -test.parallel 8 -test.timeout 60m); then
	echo "ok  	github.com/agentjobs/jobs/e2e	$((SECONDS - start))s"
else
	rc=$?
	echo "FAIL	github.com/agentjobs/jobs/e2e	$((SECONDS - start))s"
	exit "$rc"
fi

step "the race run (beside the end-to-end tests)"
waitfor "$race" "$bin/race.log" "go test -race"

# Mutation is an adversarial run: with the long sizes only (the seed
# corpora of every fuzz target ran above, as tests, either way).
if [ "$long" = 1 ]; then
	step "fuzz smoke"
	scripts/fuzz-smoke.sh
else
	echo "== fuzz smoke skipped: the long sizes are off (the seed corpora ran as tests)"
fi

if [ -n "$inspector" ]; then
	step "MCP inspector check (it ran beside the Go tests)"
	waitfor "$inspector" "$bin/inspector.log" "the MCP inspector check"
fi
