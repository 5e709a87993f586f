#!/usr/bin/env bash
# Installs what the tests drive when it is missing: tmux, sqlite3, python3,
# and the MCP client scenarios' node packages.
set -euo pipefail
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
	if [ "$(id -u)" = 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "deps.sh: please install: ${need[*]}" >&2
		exit 1
	fi
fi

# The MCP client scenarios (e2e/mcpclient_test.go) drive `jobs mcp` through
# the official TypeScript SDK client: install its locked packages. On CI a
# missing node is an error, not a skip.
client=$(dirname "$0")/../e2e/mcpclient
if command -v npm >/dev/null; then
	if [ ! -d "$client/node_modules/@modelcontextprotocol/sdk" ]; then
		(cd "$client" && npm ci --no-audit --no-fund --loglevel=error)
	fi
elif [ "${CI:-}" = true ]; then
	echo "deps.sh: node and npm are needed for the MCP client scenarios" >&2
	exit 1
fi
