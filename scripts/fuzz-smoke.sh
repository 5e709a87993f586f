#!/usr/bin/env bash
# Runs every Fuzz target of the module briefly: a CI smoke check that the
# targets build, their seed corpora pass and a few seconds of mutation find
# nothing. Longer by hand, with a duration or a count for every target, e.g.
#   FUZZTIME=10m scripts/fuzz-smoke.sh ./internal/parse
#
# CI budgets are counts of inputs, not durations: with a duration, Go's
# fuzzing coordinator (go1.26) now and then fails a target with "context
# deadline exceeded" when the time runs out while a worker is busy, more
# often on a loaded machine (golang/go#75804). A count has no such end.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=("$@")
if ((${#pkgs[@]} == 0)); then
	mapfile -t pkgs < <(go list ./...)
fi
ran=0
# With the long sizes (CI=true or JOBS_TEST_LONG=1, as for the tests)
# five times the inputs.
long=1
if [ "${CI:-}" = true ] || [ "${JOBS_TEST_LONG:-}" = 1 ]; then
	long=5
fi
for pkg in "${pkgs[@]}"; do
	# The fuzz targets are the package's `func FuzzXxx(f *testing.F)`:
	# read from its test files rather than with `go test -list`, which
	# would build every package's tests once more just to list them.
	dir=$(go list -f '{{.Dir}}' "$pkg")
	targets=$(cat "$dir"/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' || true)
	for target in $targets; do
		# A few seconds each on a quiet 2-core machine (the inputs of the
		# seed corpora also run in every go test, as tests).
		case $target in
		FuzzAppendRead) budget=$((4 * long))x ;; # a fresh database per input: a few a second
		FuzzFindJobRef) budget=$((200 * long))x ;; # SQLite lookups: hundreds a second
		*) budget=$((2000 * long))x ;;
		esac
		budget=${FUZZTIME:-$budget}
		echo "== $pkg $target ($budget)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$budget" "$pkg"
		ran=$((ran + 1))
	done
done
echo "fuzzed $ran targets"
