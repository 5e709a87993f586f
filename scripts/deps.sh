#!/usr/bin/env bash
# Installs what the tests drive when it is missing: tmux, sqlite3, python3,
# and chromium (headless, for the browser tests of `jobs ui`). Without root,
# a missing chromium is only reported: those tests then skip, except in CI.
set -euo pipefail
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v python3 >/dev/null || need+=(python3)
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
