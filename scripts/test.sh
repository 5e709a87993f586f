#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive
# (tmux, sqlite3, python3, chromium when missing), runs every package under the race
# detector, then a short run of every fuzz target and the check of `jobs mcp`
# with a real third-party MCP client (when node is present).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

# -parallel 8: most end-to-end tests wait on processes, sockets and the
# disk more than they compute, so more of them than cores run at once.
echo "== go test -race -count=1 -parallel 8 -timeout 60m ./..."
go test -race -count=1 -parallel 8 -timeout 60m ./...

if [ -x scripts/fuzz-smoke.sh ]; then
	echo "== fuzz smoke"
	scripts/fuzz-smoke.sh
fi

if command -v npx >/dev/null; then
	echo "== MCP inspector check"
	scripts/mcp-inspector-check.sh
else
	echo "== MCP inspector check skipped: node/npx not installed"
fi
