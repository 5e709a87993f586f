#!/usr/bin/env bash
# Installs what the tests drive when it is missing: tmux, sqlite3, python3,
# zsh, fish and bash-completion (the completion tests),
# chromium (headless, for the browser tests of `jobs ui`), the MCP client
# scenarios' node packages and, for the long run, litestream (the
# replication test; installed with go install). Without root, a missing chromium is only
# reported: those tests then skip, except in CI.
set -euo pipefail
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v python3 >/dev/null || need+=(python3)
# The completion tests drive real shells: bash with bash-completion, zsh,
# fish.
command -v zsh >/dev/null || need+=(zsh)
command -v fish >/dev/null || need+=(fish)
[ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
browser=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || browser+=(chromium)
if ((${#need[@]} + ${#browser[@]})); then
	if [ "$(id -u)" = 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq "${need[@]}" "${browser[@]}" >/dev/null
	elif ((${#need[@]})); then
		echo "deps.sh: please install: ${need[*]} ${browser[*]}" >&2
		exit 1
	else
		echo "deps.sh: chromium is not installed: the browser tests of jobs ui will skip" >&2
	fi
fi

# The MCP client scenarios (e2e/mcpclient_test.go) drive `jobs mcp` through
# the official TypeScript SDK client: install its locked packages. On CI a
# missing node is an error, not a skip.
client=$(dirname "$0")/../e2e/mcpclient
if command -v npm >/dev/null; then
	# npm writes node_modules/.package-lock.json when an install is complete.
	if [ ! -f "$client/node_modules/.package-lock.json" ] ||
		[ ! -f "$client/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
		(cd "$client" && npm ci --no-audit --no-fund --loglevel=error)
	fi
elif [ "${CI:-}" = true ]; then
	echo "deps.sh: node and npm are needed for the MCP client scenarios" >&2
	exit 1
fi

# Litestream replicates the database in the replication test (e2e). It is a
# Go program: go install puts it in $(go env GOPATH)/bin, where the test
# looks too. Compiling it costs about four minutes of CPU on a fresh
# machine (more than compiling the race-built tests of jobs), so it is
# installed for the long run only (CI=true or JOBS_TEST_LONG=1), where a
# missing litestream fails the run; elsewhere the test runs when
# litestream is there and is skipped with the reason when it is not.
litestream_version=v0.5.18
if ! command -v litestream >/dev/null && [ ! -x "$(go env GOPATH)/bin/litestream" ]; then
	if [ "${CI:-}" = true ] || [ "${JOBS_TEST_LONG:-}" = 1 ]; then
		if ! go install "github.com/benbjohnson/litestream/cmd/litestream@${litestream_version}"; then
			echo "deps.sh: could not install litestream ${litestream_version}" >&2
			exit 1
		fi
	else
		echo "deps.sh: litestream is not installed: the replication test will be skipped (JOBS_TEST_LONG=1 installs it)" >&2
	fi
fi
