#!/usr/bin/env bash
# Runs every test of the reliability matrix (rows A1-E10, listed in README "Reliability and security";
# a row's tests are named Test<ROW><Words>) and prints the matrix as a
# markdown table: row | test(s) | result | figure. Rows without a test are
# listed as "no test". Extra arguments go to go test, e.g.
#   scripts/matrix.sh                      # the race build, sizes scaled
#   JOBS_E2E_SCALE=1 scripts/matrix.sh     # the full sizes
#   scripts/matrix.sh -timeout 30m
# The raw go test -json stream is kept in $MATRIX_JSON when that is set.
# Exits non-zero when a test failed or a package did not build.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${MATRIX_JSON:-$(mktemp)}
[ -n "${MATRIX_JSON:-}" ] || trap 'rm -f "$out"' EXIT
go test -race -count=1 -json -run '^Test[A-E][0-9]+[A-Z]' "$@" ./... >"$out"
tests=$?
go run ./scripts/matrixreport <"$out"
report=$?
if ((tests != 0 || report != 0)); then
	exit 1
fi
