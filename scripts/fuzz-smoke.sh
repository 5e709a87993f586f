#!/usr/bin/env bash
# Runs every Fuzz target of the module briefly (FUZZTIME each, default 5s):
# a CI smoke check that the targets build, their seed corpora pass and a few
# seconds of mutation find nothing. Longer by hand, e.g.
#   FUZZTIME=10m scripts/fuzz-smoke.sh ./internal/parse
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
pkgs=("$@")
if ((${#pkgs[@]} == 0)); then
	mapfile -t pkgs < <(go list ./...)
fi
ran=0
for pkg in "${pkgs[@]}"; do
	# go test -list prints the names of the tests, fuzz targets included.
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for target in $targets; do
		budget=$fuzztime
		case $target in
		FuzzAppendRead)
			# Each input opens a fresh database, and an instrumented SQLite
			# runs a few inputs a second: an input still running when a
			# time budget ends makes the fuzzer fail with "context deadline
			# exceeded". A count of inputs has no such end.
			budget=${FUZZTIME_SLOW:-20x}
			;;
		esac
		echo "== $pkg $target ($budget)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$budget" "$pkg"
		ran=$((ran + 1))
	done
done
echo "fuzzed $ran targets"
