#!/usr/bin/env bash
# Installs what the tests drive when it is missing: tmux, sqlite3, python3.
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
