#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive
# (tmux, sqlite3, python3, chromium when missing), runs every package under the race
# detector and, beside them, the check of `jobs mcp` with a real
# third-party MCP client (when node is present). With the long sizes (CI=true or
# JOBS_TEST_LONG=1: internal/testlong) the adversarial cases run at the
# sizes the reliability matrix states, and a short run of every fuzz
# target comes after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began, in seconds from the start.
step() { echo "== $* (at ${SECONDS}s)"; }
trap 'echo "== done in ${SECONDS}s"' EXIT

# What the tests drive is installed (scripts/deps.sh: packages, the MCP
# clients' node modules, litestream) while the jobs binary builds below:
# both wait on the network and the disk as much as on the CPU.
deps_log=$(mktemp)
scripts/deps.sh >"$deps_log" 2>&1 &
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
bin=$(mktemp -d)
inspector=""
trap '[ -z "$inspector" ] || kill "$inspector" 2>/dev/null; rm -rf "$bin" "$deps_log"; echo "== done in ${SECONDS}s"' EXIT
step "build jobs (scripts/deps.sh beside it)"
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/jobs" .
export JOBS_TEST_BINARY=$bin/jobs
deps_rc=0
wait "$deps" || deps_rc=$?
cat "$deps_log"
if [ "$deps_rc" != 0 ]; then
	echo "scripts/deps.sh failed (exit $deps_rc)" >&2
	exit "$deps_rc"
fi

# A program built with the race detector sleeps a second before it exits
# with status 0 (GORACE's atexit_sleep_ms, 1000 by default): every test
# binary, and every job or helper one of them starts, would.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"

# The MCP inspector check drives the built binary on a database of its
# own: it runs beside the Go tests, and its result is read after them.
inspector_log=$bin/inspector.log
if command -v npx >/dev/null; then
	step "MCP inspector check (beside the Go tests)"
	scripts/mcp-inspector-check.sh "$JOBS_TEST_BINARY" >"$inspector_log" 2>&1 &
	inspector=$!
else
	echo "== MCP inspector check skipped: node/npx not installed"
fi

# -parallel 8: most end-to-end tests wait on processes, sockets and the
# disk more than they compute, so more of them than cores run at once.
# -vet=off: go test would run a subset of go vet on every package first,
# which on a fresh machine (nothing cached) costs about 85 s of CPU, a
# quarter of compiling the tests; vet is a check of its own, which CI runs
# whole (.ci/run: go vet ./...) before this script.
step "go test -race -vet=off -count=1 -parallel 8 -timeout 60m ./..."
go test -race -vet=off -count=1 -parallel 8 -timeout 60m ./...

# Mutation is an adversarial run: with the long sizes only (the seed
# corpora of every fuzz target ran above, as tests, either way).
if [ "$long" = 1 ]; then
	step "fuzz smoke"
	scripts/fuzz-smoke.sh
else
	echo "== fuzz smoke skipped: the long sizes are off (the seed corpora ran as tests)"
fi

if [ -n "$inspector" ]; then
	inspector_rc=0
	wait "$inspector" || inspector_rc=$?
	inspector=""
	step "MCP inspector check (it ran beside the Go tests)"
	cat "$inspector_log"
	if [ "$inspector_rc" != 0 ]; then
		echo "the MCP inspector check failed (exit $inspector_rc)" >&2
		exit "$inspector_rc"
	fi
fi
