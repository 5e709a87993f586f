#!/usr/bin/env bash
# Installs what the tests drive when it is missing: tmux, sqlite3, python3,
# and litestream (the replication test; installed with go install).
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

# Litestream replicates the database in the replication test (e2e). It is a
# Go program: go install puts it in $(go env GOPATH)/bin, where the test
# looks too. In CI a missing litestream fails the run; elsewhere the test
# is skipped with the reason.
litestream_version=v0.5.18
if ! command -v litestream >/dev/null && [ ! -x "$(go env GOPATH)/bin/litestream" ]; then
	if ! go install "github.com/benbjohnson/litestream/cmd/litestream@${litestream_version}"; then
		echo "deps.sh: could not install litestream ${litestream_version}" >&2
		if [ "${CI:-}" = true ]; then
			exit 1
		fi
	fi
fi
