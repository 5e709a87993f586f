#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive
# (tmux, sqlite3, python3 when missing), runs every package under the race
# detector, then a short run of every fuzz target and the check of `jobs mcp`
# with a real third-party MCP client (when node is present).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tmux >/dev/null || need+=(tmux)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
	if [ "$(id -u)" = 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "test.sh: please install: ${need[*]}" >&2
		exit 1
	fi
fi

echo "== go test -race ./..."
go test -race -count=1 ./...

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
